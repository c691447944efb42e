package cluster

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/proc"
)

func TestPodRoutes(t *testing.T) {
	node := func(name, cidr, ip string) corev1.Node {
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.NodeSpec{PodCIDR: cidr},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeHostName, Address: name},
				{Type: corev1.NodeInternalIP, Address: ip},
			}},
		}
	}
	got := podRoutes([]corev1.Node{
		node("n1", "10.244.0.0/24", "172.30.0.11"),
		node("n2", "10.244.1.0/24", "172.30.0.12"),
		node("n3", "", "172.30.0.13"), // no CIDR yet: no route
		func() corev1.Node {
			n := node("n4", "10.244.3.0/24", "172.30.0.14")
			n.Spec.PodCIDRs = []string{"10.244.3.0/24", "fd00:3::/64"}
			return n
		}(),
	})
	want := map[netip.Prefix]netip.Addr{
		netip.MustParsePrefix("10.244.0.0/24"): netip.MustParseAddr("172.30.0.11"),
		netip.MustParsePrefix("10.244.1.0/24"): netip.MustParseAddr("172.30.0.12"),
		netip.MustParsePrefix("10.244.3.0/24"): netip.MustParseAddr("172.30.0.14"),
	}
	if len(got) != len(want) {
		t.Fatalf("routes %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("route %s via %s, want %s", k, got[k], v)
		}
	}
}

func TestKubeProxyConfig(t *testing.T) {
	o := plan.DefaultOptions()
	o.CNI = plan.CNIBridge
	o.KubeProxy = "nftables"
	p, err := plan.New(o)
	if err != nil {
		t.Fatal(err)
	}
	b := kubeProxyConfig(p, p.Nodes[1], "/k/kube-proxy.conf")
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("invalid YAML: %v\n%s", err, b)
	}
	if cfg["mode"] != "nftables" || cfg["hostnameOverride"] != "lab-node2" || cfg["clusterCIDR"] != "10.244.0.0/16" {
		t.Errorf("config %v", cfg)
	}
	if ct := cfg["conntrack"].(map[string]any); ct["maxPerCore"] != float64(0) {
		t.Errorf("kube-proxy would resize the machine's conntrack table: %v", ct)
	}
	if !strings.Contains(string(b), "172.30.0.12:10256") {
		t.Errorf("healthz not bound to the node IP:\n%s", b)
	}
}

func TestNodeProcesses(t *testing.T) {
	o := plan.DefaultOptions()
	o.CNI = plan.CNIBridge
	o.KubeProxy = "none"
	p, _ := plan.New(o)
	for _, mode := range []string{"iptables", "none"} {
		p.KubeProxy = mode
		for _, s := range nodeProcesses(p, p.Nodes[1], controlPlaneConfig(p, "/bin-dir"), "/bin-dir") {
			if s.Cgroup != p.Nodes[1].Cgroup || s.Cgroup == "" {
				t.Errorf("%s in cgroup %q, want the node's %q", s.Name, s.Cgroup, p.Nodes[1].Cgroup)
			}
		}
	}
	specs := nodeProcesses(p, p.Nodes[0], controlPlaneConfig(p, "/bin-dir"), "/bin-dir")
	if len(specs) != 1 || specs[0].Name != "node-agent/lab-node1" {
		t.Fatalf("with --kube-proxy=none: %+v", specs)
	}
	ns := specs[0].Namespaces
	if ns.Net != p.Nodes[0].Netns || ns.Mnt != p.Nodes[0].MntNS || ns.UTS != p.Nodes[0].UTSNS {
		t.Errorf("node agent namespaces %+v", ns)
	}
	if !strings.Contains(strings.Join(specs[0].Args, " "), "--bridge-cni=true") {
		t.Errorf("args %v", specs[0].Args)
	}
	o.Zones = []string{"zone-a", "zone-b"}
	p, _ = plan.New(o)
	specs = nodeProcesses(p, p.Nodes[1], controlPlaneConfig(p, "/bin-dir"), "/bin-dir")
	if !strings.Contains(strings.Join(specs[0].Args, " "), "--zone=zone-b") {
		t.Errorf("node 2 of zones a, b: args %v", specs[0].Args)
	}
}

func TestFirstLineNamesFailingChecks(t *testing.T) {
	msg := `an error on the server ("[+]ping ok\n[+]etcd ok\n[-]etcd-readiness failed: reason withheld\n[-]informer-sync failed: reason withheld\nreadyz check failed")`
	if got, want := firstLine(msg), "API server checks not passing yet: etcd-readiness, informer-sync"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := firstLine("0 of 2 nodes Ready\nmore"); got != "0 of 2 nodes Ready" {
		t.Errorf("got %q", got)
	}
}

func TestMachineNamespaces(t *testing.T) {
	o := plan.DefaultOptions()
	o.CNI = plan.CNIBridge
	p, err := plan.New(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want proc.Namespaces
	}{
		{"outside", proc.Namespaces{Net: "/run/netns/lab-outside"}},
		{"lab-outside", proc.Namespaces{Net: "/run/netns/lab-outside"}},
		{"control-plane", proc.Namespaces{Net: "/run/netns/lab-control-plane"}},
		{"lab-node2", nodeNamespaces(p.Nodes[1])},
	} {
		got, err := machineNamespaces(p, tc.name)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	if _, err := machineNamespaces(p, "lab-node9"); err == nil || !strings.Contains(err.Error(), "outside, control-plane, lab-node1, lab-node2") {
		t.Errorf("unknown machine: %v", err)
	}
	p.Outside = plan.Outside{} // a plan saved before the outside client existed
	if _, err := machineNamespaces(p, "outside"); err == nil {
		t.Error("outside on an old plan: want an error")
	}
}

func TestInsideClusterCIDR(t *testing.T) {
	cluster := netip.MustParsePrefix("10.244.0.0/16")
	for _, tc := range []struct {
		pfx  string
		want bool
	}{
		{"10.244.1.0/24", true}, {"10.244.0.0/16", true},
		{"0.0.0.0/0", false}, {"10.0.0.0/8", false}, {"10.245.0.0/24", false},
	} {
		if got := inside(cluster, netip.MustParsePrefix(tc.pfx)); got != tc.want {
			t.Errorf("inside(%s, %s) = %v, want %v", cluster, tc.pfx, got, tc.want)
		}
	}
}
