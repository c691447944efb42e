package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/lab/internal/netns"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/world"
)

// kubectl runs the lab's kubectl against the test lab.
func (l *testLab) kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(l.binDir, "kubectl"), append([]string{"--kubeconfig", Kubeconfig(l.p.StateDir)}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// What cilium-cli's connectivity test asks of the world, from a pod of a
// cilium-go lab (installed as pods, as users run it), with the flags
// connectivity-test-flags prints: cluster DNS resolves the world's names,
// fully qualified too; curl gets 200 over HTTP and HTTPS from both addresses
// and by name (the certificate verifies against the lab CA, and only
// against it); pings come back; the world sees the pod's node, masqueraded.
func TestPrivilegedWorld(t *testing.T) {
	labBinDir(t, append(ciliumBinaries(), "cilium-dbg", "kubectl")...)
	installDir, err := filepath.Abs(filepath.Join("..", "..", "..", "install", "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	l := upTestLab(t, func(o *plan.Options) {
		o.CNI, o.CiliumAs, o.InstallDir, o.KubeProxy = plan.CNICilium, plan.CiliumAsPods, installDir, ""
	})
	w := l.p.World
	target, other := w.Target, w.Other

	out, err := l.labCmd(t, "connectivity-test-flags")
	want := "--external-target world.cilium-lab.test. --external-other-target other.world.cilium-lab.test. " +
		"--external-ip 192.0.2.1 --external-other-ip 192.0.2.2 --external-cidr 192.0.2.0/24 --curl-insecure\n"
	if err != nil || out != want {
		t.Errorf("cilium-lab connectivity-test-flags: %v\n%q\nwant\n%q", err, out, want)
	}

	// The lab CA, as a client that trusts it has it.
	ca, err := os.ReadFile(filepath.Join(layout{l.p.StateDir}.pki(), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "lab-ca"},
		Data:       map[string]string{"ca.crt": string(ca)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := l.p.Nodes[0]
	// The connectivity suite's client: alpine-curl running pause.
	l.runPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			NodeName: node.Name,
			Containers: []corev1.Container{{Name: "c", Image: "quay.io/cilium/alpine-curl:v1.10.0",
				Command:      []string{"/usr/bin/pause"},
				VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/lab-ca"}}}},
			Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "lab-ca"}}}}},
		},
	})
	inPod := func(args ...string) (string, error) {
		t.Helper()
		return l.kubectl(t, append([]string{"exec", "client", "--"}, args...)...)
	}

	t.Run("DNS", func(t *testing.T) {
		// Fully qualified as the suite asks, and through the search path. The
		// first query may come before the pod's endpoint is programmed.
		eventually(t, 30*time.Second, "the world's names in cluster DNS", func() error {
			for _, h := range w.Hosts() {
				for _, name := range []string{h.Name + ".", h.Name} {
					out, err := inPod("dig", "+short", "+search", "A", name)
					if err != nil || strings.TrimSpace(out) != h.IP.String() {
						return fmt.Errorf("dig %s: %v: %q, want %s", name, err, out, h.IP) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
					}
				}
			}
			return nil
		})
	})

	curl := func(t *testing.T, args ...string) {
		t.Helper()
		out, err := inPod(append([]string{"curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}"}, args...)...)
		if err != nil || out != world.Body+"\n200" {
			t.Errorf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Run("curl", func(t *testing.T) {
		// pod-to-world, with --curl-insecure.
		curl(t, "http://"+target.Name+".")
		curl(t, "-k", "https://"+target.Name+".")
		curl(t, "-k", "https://"+target.Name+"./index.html")
		// pod-to-cidr.
		curl(t, "-k", "https://"+target.IP.String())
		curl(t, "-k", "https://"+other.IP.String())
	})

	t.Run("certificate", func(t *testing.T) {
		urls := []string{"https://" + target.Name + ".", "https://" + other.Name + "./index.html",
			"https://" + target.IP.String(), "https://" + other.IP.String()}
		for _, h := range w.Guides {
			urls = append(urls, "https://"+h.Name)
		}
		for _, u := range urls {
			curl(t, "--cacert", "/lab-ca/ca.crt", u)
		}
		// Without the lab CA it does not verify: the check above means something.
		out, err := inPod("curl", "-sS", "--max-time", "10", "https://"+target.Name+".")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 60 {
			t.Errorf("curl without the lab CA: %v, want exit code 60 (peer certificate cannot be authenticated)\n%s", err, out)
		}
	})

	t.Run("ping", func(t *testing.T) {
		for _, h := range w.Hosts() {
			if out, err := inPod("ping", "-c", "1", "-W", "5", h.IP.String()); err != nil {
				t.Errorf("ping %s: %v\n%s", h.IP, err, out)
			}
		}
	})

	t.Run("masquerade", func(t *testing.T) {
		// Whom the world sees: the pod's node, and its replies find the way back.
		ln, err := netns.Listen(l.p.Outside.Netns, "tcp", net.JoinHostPort(target.IP.String(), "8099"))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			io.WriteString(w, host)
		}), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		out, err := inPod("curl", "-sS", "--max-time", "10", "http://"+net.JoinHostPort(target.IP.String(), "8099"))
		if err != nil || out != node.IP.String() {
			t.Errorf("the world saw %q (%v), want the node's %s", out, err, node.IP)
		}
	})
}
