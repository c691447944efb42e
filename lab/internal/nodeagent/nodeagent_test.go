package nodeagent

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBridgeConfigIsValidForLibcni(t *testing.T) {
	dir := t.TempDir()
	if err := writeBridgeConfig(dir, "10.244.1.0/24"); err != nil {
		t.Fatal(err)
	}
	n := newCNINetwork(dir, "/opt/cni/bin", t.TempDir())
	list, err := n.config()
	if err != nil {
		t.Fatal(err)
	}
	if list.Name != "lab-bridge" || len(list.Plugins) != 2 || list.Plugins[0].Network.Type != "bridge" {
		t.Fatalf("unexpected network %+v", list)
	}
	var conf struct {
		IPAM struct {
			Ranges [][]struct{ Subnet string } `json:"ranges"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(list.Plugins[0].Bytes, &conf); err != nil || conf.IPAM.Ranges[0][0].Subnet != "10.244.1.0/24" {
		t.Fatalf("ipam %+v %v", conf, err)
	}
	if err := writeBridgeConfig(dir, "not-a-cidr"); err == nil {
		t.Fatal("a bad pod CIDR was accepted")
	}
}

func TestFirstConfigFileWins(t *testing.T) {
	dir := t.TempDir()
	if err := newCNINetwork(dir, "", t.TempDir()).Ready(); !errors.Is(err, ErrNoNetworkConfig) {
		t.Fatalf("empty dir: %v, want ErrNoNetworkConfig", err)
	}
	write := func(name, netName string) {
		b := []byte(`{"cniVersion":"1.0.0","name":"` + netName + `","plugins":[{"type":"loopback"}]}`)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("20-second.conflist", "second")
	write("05-cilium.conflist", "first")
	os.WriteFile(filepath.Join(dir, "00-partial.conflist.tmp"), []byte("{"), 0o644)
	list, err := newCNINetwork(dir, "", t.TempDir()).config()
	if err != nil || list.Name != "first" {
		t.Fatalf("got %v %v, want the lexically first file", list, err)
	}
}

func TestRuntimeConfArgs(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "u-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP},
			{ContainerPort: 9090},
		}}}},
	}
	rt := runtimeConf(pod, "sandbox-1", "/var/lib/kubelet/pods/u-1/netns")
	args := map[string]string{}
	for _, a := range rt.Args {
		args[a[0]] = a[1]
	}
	if args["K8S_POD_NAME"] != "web" || args["K8S_POD_NAMESPACE"] != "prod" || args["K8S_POD_UID"] != "u-1" ||
		args["K8S_POD_INFRA_CONTAINER_ID"] != "sandbox-1" || args["IgnoreUnknown"] != "1" || rt.IfName != "eth0" {
		t.Errorf("args %v ifname %s", args, rt.IfName)
	}
	pm, _ := rt.CapabilityArgs["portMappings"].([]map[string]any)
	if len(pm) != 1 || pm[0]["hostPort"] != int32(8080) || pm[0]["protocol"] != "tcp" {
		t.Errorf("port mappings %v", rt.CapabilityArgs)
	}
}

func TestOnlyUser(t *testing.T) {
	h := onlyUser("kube-apiserver-kubelet-client", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	for _, tc := range []struct {
		name string
		cn   string
		tls  bool
		want int
	}{
		{"api server", "kube-apiserver-kubelet-client", true, 200},
		{"another node", "system:node:lab-node2", true, 403},
		{"no client certificate", "", false, 403},
	} {
		r := httptest.NewRequest("GET", "/containerLogs/default/p/c", nil)
		if tc.tls {
			cert := &x509.Certificate{Subject: pkix.Name{CommonName: tc.cn}}
			r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, w.Code, tc.want)
		}
	}
}

type fakeNetwork struct{ err error }

func (f *fakeNetwork) Ready() error { return f.err }

func TestNodeStatusFollowsNetwork(t *testing.T) {
	net := &fakeNetwork{err: ErrNoNetworkConfig}
	s := newNodeStatus(nodeSpec(Config{Node: "n1"}), net, slog.New(slog.DiscardHandler))
	var reports []corev1.ConditionStatus
	s.NotifyNodeStatus(t.Context(), func(n *corev1.Node) {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				reports = append(reports, c.Status)
			}
		}
	})
	s.check()
	s.check() // no change: no report
	net.err = nil
	s.check()
	want := []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue}
	if len(reports) != 2 || reports[0] != want[0] || reports[1] != want[1] {
		t.Fatalf("reports %v, want %v", reports, want)
	}
}

// The node carries its zone as a cloud's kubelet does, and no zone label
// without one.
func TestNodeZone(t *testing.T) {
	if z, ok := nodeSpec(Config{Node: "n1", Zone: "zone-a"}).Labels[corev1.LabelTopologyZone]; !ok || z != "zone-a" {
		t.Errorf("zone label %q (%v), want zone-a", z, ok)
	}
	if z, ok := nodeSpec(Config{Node: "n1"}).Labels[corev1.LabelTopologyZone]; ok {
		t.Errorf("no zone: label %q", z)
	}
}
