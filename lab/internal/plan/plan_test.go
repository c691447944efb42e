package plan

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// options are the defaults with what the command fills in.
func options() Options {
	o := DefaultOptions()
	o.InstallDir = "/src/cilium/install/kubernetes"
	return o
}

func TestNewDefault(t *testing.T) {
	o := options()
	o.StateDir = t.TempDir()
	o.Nodes = 3
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.ControlPlaneIP, netip.MustParseAddr("172.30.0.2"); got != want {
		t.Errorf("control plane IP %s, want %s", got, want)
	}
	if got, want := p.APIServiceIP, netip.MustParseAddr("10.96.0.1"); got != want {
		t.Errorf("API service IP %s, want %s", got, want)
	}
	if got, want := p.ClusterDNS, netip.MustParseAddr("10.96.0.10"); got != want {
		t.Errorf("cluster DNS %s, want %s", got, want)
	}
	seen := map[netip.Addr]bool{p.ControlPlaneIP: true}
	for i, n := range p.Nodes {
		if !p.Underlay.Contains(n.IP) || seen[n.IP] {
			t.Errorf("node %d IP %s: outside the underlay or taken twice", i, n.IP)
		}
		seen[n.IP] = true
		if !strings.HasPrefix(n.Netns, "/run/netns/lab-node") || !strings.HasPrefix(n.MntNS, o.StateDir) {
			t.Errorf("node %d namespace files %s %s", i, n.Netns, n.MntNS)
		}
	}
	if p.Cgroup != "/sys/fs/cgroup/cilium-lab-lab" || p.Nodes[2].Cgroup != "/sys/fs/cgroup/cilium-lab-lab/lab-node3" {
		t.Errorf("cgroups: lab %s, node %s", p.Cgroup, p.Nodes[2].Cgroup)
	}
	out := p.Outside
	if out.IP != netip.MustParseAddr("172.30.0.254") || seen[out.IP] || out.Name != "lab-outside" ||
		out.Netns != "/run/netns/lab-outside" {
		t.Errorf("outside client %+v: want the underlay's last usable address, in its own namespace", out)
	}
	for _, pfx := range []netip.Prefix{p.ClusterCIDR, p.ServiceCIDR} {
		if pfx.Contains(out.IP) {
			t.Errorf("outside client %s inside %s", out.IP, pfx)
		}
	}
	if _, ok := p.Node("lab-node3"); !ok {
		t.Error("lab-node3 not found")
	}
	if p.CNI != CNICilium || p.RoutingMode != "tunnel" || p.InstallDir != o.InstallDir {
		t.Errorf("CNI %q routing %q install dir %q: want cilium-go in tunnel mode by default", p.CNI, p.RoutingMode, p.InstallDir)
	}
	if p.HostUIPort != 12000 {
		t.Errorf("Hubble UI on port %d, want cilium-cli's 12000", p.HostUIPort)
	}
	o.CiliumAs = CiliumAsProcesses
	if p, err := New(o); err != nil || p.HostUIPort != 0 {
		t.Errorf("cilium-go as processes: %v, Hubble UI on port %d, want none: hubble-ui runs only as a pod", err, p.HostUIPort)
	}
	o.CNI = CNIBridge
	if p, err := New(o); err != nil || p.RoutingMode != "" || p.InstallDir != "" || p.HostUIPort != 0 {
		t.Errorf("bridge plan: %v, routing %q install dir %q UI port %d: cilium settings must not leak", err, p.RoutingMode, p.InstallDir, p.HostUIPort)
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*Options)
		want  string
	}{
		{"bad name", func(o *Options) { o.Name = "Lab_1" }, "name"},
		{"relative state", func(o *Options) { o.StateDir = "state" }, "state dir"},
		{"no nodes", func(o *Options) { o.Nodes = 0 }, "nodes 0"},
		{"cni", func(o *Options) { o.CNI = "flannel" }, `cni "flannel"`},
		{"routing mode", func(o *Options) { o.RoutingMode = "direct" }, `routing mode "direct"`},
		{"install dir", func(o *Options) { o.InstallDir = "install/kubernetes" }, "install dir"},
		{"kube-proxy", func(o *Options) { o.KubeProxy = "ipvs" }, `kube-proxy "ipvs"`},
		{"overlap", func(o *Options) { o.ServiceCIDR = netip.MustParsePrefix("10.244.128.0/20") }, "overlaps"},
		{"node mask", func(o *Options) { o.NodeMask = 16 }, "node mask"},
		{"too many nodes", func(o *Options) {
			o.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/23")
			o.Nodes = 3
		}, "holds 2 nodes"},
		{"cgroup root", func(o *Options) { o.CgroupRoot = "sys/fs/cgroup" }, "cgroup root"},
		{"ipv6 underlay", func(o *Options) { o.Underlay = netip.MustParsePrefix("fd00::/64") }, "underlay"},
		{"world in the underlay", func(o *Options) { o.World = netip.MustParsePrefix("172.30.0.128/25") }, "underlay 172.30.0.0/24 overlaps world"},
		{"world holds the pods", func(o *Options) { o.World = netip.MustParsePrefix("10.0.0.0/8") }, "cluster CIDR 10.244.0.0/16 overlaps world"},
		{"world in the services", func(o *Options) { o.World = netip.MustParsePrefix("10.96.3.0/24") }, "service CIDR 10.96.0.0/16 overlaps world"},
		{"world too small", func(o *Options) { o.World = netip.MustParsePrefix("192.0.2.4/31") }, "world 192.0.2.4/31"},
		{"ipv6 world", func(o *Options) { o.World = netip.MustParsePrefix("2001:db8::/64") }, "world"},
		{"no world", func(o *Options) { o.World = netip.Prefix{} }, "world"},
		{"empty zone", func(o *Options) { o.Zones = []string{"a", ""} }, `zone ""`},
		{"zone not a label value", func(o *Options) { o.Zones = []string{"eu west"} }, `zone "eu west"`},
		{"ui port", func(o *Options) { o.UIPort = 70000 }, "ui port 70000"},
		{"ui port is the API's", func(o *Options) { o.UIPort = o.APIPort }, "ui port 16443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options()
			tc.tweak(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestSaveLoad(t *testing.T) {
	o := options()
	o.StateDir = t.TempDir()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(o.StateDir); !errors.Is(err, ErrNoLab) {
		t.Fatalf("load before save: %v, want ErrNoLab", err)
	}
	if err := p.Save(); err != nil {
		t.Fatal(err)
	}
	q, err := Load(o.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if q.Nodes[1] != p.Nodes[1] || q.ClusterDNS != p.ClusterDNS || q.HostAPIPort != p.HostAPIPort || q.HostUIPort != p.HostUIPort || q.Outside != p.Outside ||
		!reflect.DeepEqual(q.World, p.World) {
		t.Fatalf("reloaded plan differs: %+v vs %+v", q, p)
	}
}

// cilium-go replaces kube-proxy unless asked for one; the bridge baseline
// gets iptables.
func TestKubeProxyDefault(t *testing.T) {
	for cni, want := range map[string]string{CNICilium: "none", CNIBridge: "iptables"} {
		o := DefaultOptions()
		o.CNI = cni
		o.InstallDir = "/src/install/kubernetes"
		p, err := New(o)
		if err != nil || p.KubeProxy != want {
			t.Errorf("--cni=%s: kube-proxy %q (%v), want %s", cni, p.KubeProxy, err, want)
		}
	}
}

// Nodes take the zones in turn, and keep them across a save; without
// zones they have none.
func TestZones(t *testing.T) {
	o := options()
	o.StateDir = t.TempDir()
	o.Nodes = 3
	o.Zones = []string{"zone-a", "zone-b"}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range p.Nodes {
		got = append(got, n.Zone)
	}
	if strings.Join(got, ",") != "zone-a,zone-b,zone-a" {
		t.Errorf("zones %v, want zone-a, zone-b, zone-a", got)
	}
	if err := p.Save(); err != nil {
		t.Fatal(err)
	}
	if q, err := Load(o.StateDir); err != nil || q.Nodes[1].Zone != "zone-b" {
		t.Errorf("reloaded: %v, node 2's zone %q", err, q.Nodes[1].Zone)
	}
	o.Zones = nil
	if p, err := New(o); err != nil || p.Nodes[0].Zone != "" {
		t.Errorf("no zones: %v, node 1's zone %q", err, p.Nodes[0].Zone)
	}
}
