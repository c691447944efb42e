// Package plan computes the layout of a lab cluster: names, addresses and CIDRs of the
// control plane and every node. It is pure: a Plan is derived from Options alone, saved
// next to the lab's state and read back by every later command (down, status, exec).
package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation"
)

// CNI choices for the lab's pod network.
const (
	CNICilium = "cilium" // cilium-go: agent, CNI plugin and operator
	CNIBridge = "bridge" // containernetworking reference plugins: the baseline

	// How cilium-go runs in the lab: installed from install/kubernetes as
	// pods (the DaemonSet and Deployments, as users run it), or as processes
	// the supervisor starts in the nodes (quick to iterate on).
	CiliumAsPods      = "pods"
	CiliumAsProcesses = "processes"
)

// How cilium-go carries pod traffic between nodes.
var routingModes = map[string]bool{"tunnel": true, "native": true}

// kube-proxy modes; "none" runs no kube-proxy: with cilium-go, the agent
// balances Services (its kube-proxy replacement). Empty picks none for
// cilium-go and iptables for the bridge baseline.
var kubeProxyModes = map[string]bool{"iptables": true, "nftables": true, "none": true}

// Options are what a user chooses on `cilium-lab up`.
type Options struct {
	Name     string // prefix of every namespace and device name
	StateDir string
	Nodes    int
	CNI      string
	// RoutingMode is cilium-go's: tunnel (VXLAN) or native.
	RoutingMode string
	// InstallDir is install/kubernetes of the repository: the lab applies its
	// ServiceAccounts and RBAC for cilium-go.
	InstallDir string
	// CiliumAs is CiliumAsPods or CiliumAsProcesses.
	CiliumAs    string
	KubeProxy   string
	Underlay    netip.Prefix
	ClusterCIDR netip.Prefix
	NodeMask    int
	ServiceCIDR netip.Prefix
	// World is the prefix of the world's addresses, in the outside client's
	// namespace (see World).
	World   netip.Prefix
	APIPort int // on the host's loopback, held open by the supervisor
	// UIPort is where, on the host's loopback, the supervisor forwards to
	// the hubble-ui Service (with cilium-go as pods); 0: nowhere.
	UIPort int
	// CgroupRoot is where the machine's cgroup v2 hierarchy is mounted.
	CgroupRoot string
	// HubbleExport has every agent export its flows to the node's
	// HubbleExportFile.
	HubbleExport bool
	// Zones are the nodes' zones (their topology.kubernetes.io/zone
	// label), in turn: node i is in Zones[(i-1) % len(Zones)]. None: the
	// nodes have no zone.
	Zones []string
}

// HubbleExportFile is where, in a node's mount namespace, its agent
// exports flows with --hubble-export: Cilium's chart's path.
const HubbleExportFile = "/var/run/cilium/hubble/events.log"

// DefaultOptions returns the options of a plain `cilium-lab up`.
func DefaultOptions() Options {
	return Options{
		Name:        "lab",
		StateDir:    "/var/lib/cilium-lab",
		Nodes:       2,
		CNI:         CNICilium,
		RoutingMode: "tunnel",
		CiliumAs:    CiliumAsPods,
		KubeProxy:   "",
		Underlay:    netip.MustParsePrefix("172.30.0.0/24"),
		ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		NodeMask:    24,
		ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16"),
		// TEST-NET-1 (RFC 5737): documentation's addresses, never the internet's.
		World:   netip.MustParsePrefix("192.0.2.0/24"),
		APIPort: 16443,
		// cilium-cli's `cilium hubble ui` port.
		UIPort:     12000,
		CgroupRoot: "/sys/fs/cgroup",
	}
}

// Node is one machine of the lab.
type Node struct {
	Name string     `json:"name"`
	IP   netip.Addr `json:"ip"`
	// Netns is the node's network namespace file (under /run/netns, so `ip netns` sees it).
	Netns string `json:"netns"`
	// MntNS and UTSNS are the node's mount and UTS namespace files.
	MntNS string `json:"mntns"`
	UTSNS string `json:"utsns"`
	// Dir holds the node's directories that are bind-mounted into its mount namespace.
	Dir string `json:"dir"`
	// Uplink is the node's interface on the underlay.
	Uplink string `json:"uplink"`
	// Zone is the node's topology.kubernetes.io/zone label; "" for none.
	Zone string `json:"zone,omitempty"`
	// Cgroup is the node's cgroup v2 directory, below the lab's: every process the
	// node runs (node agent, cilium-agent, kube-proxy, pods) lives in it or below,
	// as a real node's processes live below its root cgroup. Socket-level load
	// balancing attaches here (cilium's --cgroup-root).
	Cgroup string `json:"cgroup,omitempty"`
}

// Outside is a machine on the underlay that is not part of the cluster: the "rest of
// the world" a real node reaches through its default route. Every node and the control
// plane route by default through it; it does not forward, so whatever it receives for
// another address dies there and nothing leaves the lab. It knows no route to pods or
// Services, as a client outside the cluster would not.
type Outside struct {
	Name  string     `json:"name"`
	IP    netip.Addr `json:"ip"`
	Netns string     `json:"netns"`
	// Uplink is its interface on the underlay.
	Uplink string `json:"uplink"`
}

// Plan is the full layout of one lab.
type Plan struct {
	Name     string `json:"name"`
	StateDir string `json:"stateDir"`
	CNI      string `json:"cni"`
	// RoutingMode and InstallDir matter with CNI cilium only.
	RoutingMode string `json:"routingMode,omitempty"`
	InstallDir  string `json:"installDir,omitempty"`
	CiliumAs    string `json:"ciliumAs,omitempty"`
	// KubeProxy is the kube-proxy mode, or "none".
	KubeProxy string `json:"kubeProxy"`
	// HubbleExport: the agents export flows to HubbleExportFile.
	HubbleExport bool `json:"hubbleExport,omitempty"`

	Underlay        netip.Prefix `json:"underlay"`
	UnderlayNetns   string       `json:"underlayNetns"`
	UnderlayBridge  string       `json:"underlayBridge"`
	ControlPlaneIP  netip.Addr   `json:"controlPlaneIP"`
	ControlPlaneNS  string       `json:"controlPlaneNetns"`
	ControlPlaneDir string       `json:"controlPlaneDir"`
	APIPort         int          `json:"apiPort"`
	// HostAPIPort is the port on the host's 127.0.0.1 where the user's kubectl connects.
	HostAPIPort int `json:"hostAPIPort"`
	// HostUIPort is the port on the host's 127.0.0.1 the supervisor asks
	// for to serve Hubble UI from; when taken it serves from another
	// (cluster.UIURL). 0: no UI (no cilium-go pods, or --ui-port 0).
	HostUIPort int `json:"hostUIPort,omitempty"`
	// Outside is the underlay's client outside the cluster and every machine's gateway.
	Outside Outside `json:"outside"`
	// World is what pods reach beyond the cluster, served by the outside client.
	World World `json:"world"`
	// Cgroup is the lab's cgroup v2 directory: the supervisor and every process it
	// starts, the nodes' cgroups below it.
	Cgroup string `json:"cgroup,omitempty"`

	ClusterCIDR   netip.Prefix `json:"clusterCIDR"`
	NodeMask      int          `json:"nodeMask"`
	ServiceCIDR   netip.Prefix `json:"serviceCIDR"`
	APIServiceIP  netip.Addr   `json:"apiServiceIP"`
	ClusterDNS    netip.Addr   `json:"clusterDNS"`
	ClusterDomain string       `json:"clusterDomain"`

	Nodes []Node `json:"nodes"`
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

// New derives a Plan from options, or says which option is wrong.
func New(o Options) (Plan, error) {
	if !nameRE.MatchString(o.Name) {
		return Plan{}, fmt.Errorf("name %q: want 1-8 lowercase letters or digits, starting with a letter", o.Name)
	}
	if !filepath.IsAbs(o.StateDir) {
		return Plan{}, fmt.Errorf("state dir %q: must be an absolute path", o.StateDir)
	}
	if o.Nodes < 1 || o.Nodes > 50 {
		return Plan{}, fmt.Errorf("nodes %d: want 1 to 50", o.Nodes)
	}
	switch o.CNI {
	case CNIBridge:
		o.RoutingMode, o.InstallDir, o.CiliumAs = "", "", ""
	case CNICilium:
		if !routingModes[o.RoutingMode] {
			return Plan{}, fmt.Errorf("routing mode %q: want tunnel or native", o.RoutingMode)
		}
		if !filepath.IsAbs(o.InstallDir) {
			return Plan{}, fmt.Errorf("install dir %q: must be an absolute path", o.InstallDir)
		}
		if o.CiliumAs == "" {
			o.CiliumAs = CiliumAsPods
		}
		if o.CiliumAs != CiliumAsPods && o.CiliumAs != CiliumAsProcesses {
			return Plan{}, fmt.Errorf("cilium as %q: want %q or %q", o.CiliumAs, CiliumAsPods, CiliumAsProcesses)
		}
	default:
		return Plan{}, fmt.Errorf("cni %q: want %q or %q", o.CNI, CNICilium, CNIBridge)
	}
	if o.KubeProxy == "" {
		// cilium-go replaces kube-proxy; the bridge baseline needs one.
		o.KubeProxy = "none"
		if o.CNI == CNIBridge {
			o.KubeProxy = "iptables"
		}
	}
	if !kubeProxyModes[o.KubeProxy] {
		return Plan{}, fmt.Errorf("kube-proxy %q: want iptables, nftables or none", o.KubeProxy)
	}
	if !filepath.IsAbs(o.CgroupRoot) {
		return Plan{}, fmt.Errorf("cgroup root %q: must be an absolute path", o.CgroupRoot)
	}
	if o.APIPort < 1 || o.APIPort > 65535 {
		return Plan{}, fmt.Errorf("api port %d: out of range", o.APIPort)
	}
	if o.UIPort < 0 || o.UIPort > 65535 || o.UIPort == o.APIPort {
		return Plan{}, fmt.Errorf("ui port %d: out of range or the API's", o.UIPort)
	}
	if err := checkPrefixes(o); err != nil {
		return Plan{}, err
	}
	for _, z := range o.Zones {
		if errs := validation.IsValidLabelValue(z); z == "" || len(errs) > 0 {
			return Plan{}, fmt.Errorf("zone %q: want a label value: up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", z)
		}
	}

	p := Plan{
		Name:            o.Name,
		StateDir:        o.StateDir,
		CNI:             o.CNI,
		RoutingMode:     o.RoutingMode,
		InstallDir:      o.InstallDir,
		CiliumAs:        o.CiliumAs,
		KubeProxy:       o.KubeProxy,
		HubbleExport:    o.HubbleExport && o.CNI == CNICilium,
		Underlay:        o.Underlay.Masked(),
		UnderlayNetns:   "/run/netns/" + o.Name + "-underlay",
		UnderlayBridge:  o.Name + "0",
		ControlPlaneNS:  "/run/netns/" + o.Name + "-control-plane",
		ControlPlaneDir: filepath.Join(o.StateDir, "control-plane"),
		APIPort:         6443,
		HostAPIPort:     o.APIPort,
		ClusterCIDR:     o.ClusterCIDR.Masked(),
		NodeMask:        o.NodeMask,
		ServiceCIDR:     o.ServiceCIDR.Masked(),
		ClusterDomain:   "cluster.local",
		Cgroup:          filepath.Join(o.CgroupRoot, "cilium-lab-"+o.Name),
	}
	base := p.Underlay.Addr()
	p.ControlPlaneIP = nth(base, 2)
	// The last usable address, far from the nodes counted up from the start.
	p.Outside = Outside{
		Name:   o.Name + "-outside",
		IP:     nth(base, 1<<(32-p.Underlay.Bits())-2),
		Netns:  "/run/netns/" + o.Name + "-outside",
		Uplink: "eth0",
	}
	p.World = newWorld(o.World.Masked())
	// install/kubernetes's hubble-ui runs only with cilium-go as pods.
	if p.CNI == CNICilium && p.CiliumAs == CiliumAsPods {
		p.HostUIPort = o.UIPort
	}
	p.APIServiceIP = nth(p.ServiceCIDR.Addr(), 1)
	p.ClusterDNS = nth(p.ServiceCIDR.Addr(), 10)
	for i := 1; i <= o.Nodes; i++ {
		name := fmt.Sprintf("%s-node%d", o.Name, i)
		zone := ""
		if len(o.Zones) > 0 {
			zone = o.Zones[(i-1)%len(o.Zones)]
		}
		p.Nodes = append(p.Nodes, Node{
			Zone:   zone,
			Name:   name,
			IP:     nth(base, 10+i),
			Netns:  "/run/netns/" + name,
			MntNS:  filepath.Join(o.StateDir, "ns", name+".mnt"),
			UTSNS:  filepath.Join(o.StateDir, "ns", name+".uts"),
			Dir:    filepath.Join(o.StateDir, "nodes", name),
			Uplink: "eth0",
			Cgroup: filepath.Join(p.Cgroup, name),
		})
	}
	return p, nil
}

func checkPrefixes(o Options) error {
	if !o.Underlay.IsValid() || !o.Underlay.Addr().Is4() || o.Underlay.Bits() > 24 {
		return fmt.Errorf("underlay %s: want an IPv4 prefix of /24 or larger", o.Underlay)
	}
	// Nodes count up from .11; the outside client takes the last usable address.
	if o.Nodes+10 >= 1<<(32-o.Underlay.Bits())-2 {
		return fmt.Errorf("underlay %s: too small for %d nodes", o.Underlay, o.Nodes)
	}
	if !o.ClusterCIDR.IsValid() || !o.ClusterCIDR.Addr().Is4() {
		return fmt.Errorf("cluster CIDR %s: want an IPv4 prefix", o.ClusterCIDR)
	}
	if o.NodeMask <= o.ClusterCIDR.Bits() || o.NodeMask > 28 {
		return fmt.Errorf("node mask /%d: must be longer than the cluster CIDR's /%d and at most /28",
			o.NodeMask, o.ClusterCIDR.Bits())
	}
	if n := o.NodeMask - o.ClusterCIDR.Bits(); n < 31 && o.Nodes > 1<<n {
		return fmt.Errorf("cluster CIDR %s with /%d per node holds %d nodes, not %d",
			o.ClusterCIDR, o.NodeMask, 1<<n, o.Nodes)
	}
	if !o.ServiceCIDR.IsValid() || !o.ServiceCIDR.Addr().Is4() || o.ServiceCIDR.Bits() > 24 {
		return fmt.Errorf("service CIDR %s: want an IPv4 prefix of /24 or larger", o.ServiceCIDR)
	}
	if !o.World.IsValid() || !o.World.Addr().Is4() || o.World.Bits() > 30 {
		return fmt.Errorf("world %s: want an IPv4 prefix of /30 or larger (two addresses)", o.World)
	}
	named := []struct {
		name string
		p    netip.Prefix
	}{{"underlay", o.Underlay}, {"cluster CIDR", o.ClusterCIDR}, {"service CIDR", o.ServiceCIDR}, {"world", o.World}}
	for i := range named {
		for j := i + 1; j < len(named); j++ {
			if named[i].p.Overlaps(named[j].p) {
				return fmt.Errorf("%s %s overlaps %s %s", named[i].name, named[i].p, named[j].name, named[j].p)
			}
		}
	}
	return nil
}

// nth returns the address n after a.
func nth(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Node returns the node with the given name.
func (p Plan) Node(name string) (Node, bool) {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// File is where a lab keeps its plan.
func File(stateDir string) string { return filepath.Join(stateDir, "plan.json") }

// Save writes the plan into its state directory.
func (p Plan) Save() error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.StateDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(File(p.StateDir), append(b, '\n'), 0o600)
}

// ErrNoLab means no plan was saved in the state directory.
var ErrNoLab = errors.New("no lab")

// Load reads the plan of the lab in stateDir.
func Load(stateDir string) (Plan, error) {
	b, err := os.ReadFile(File(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return Plan{}, fmt.Errorf("%s: %w", stateDir, ErrNoLab)
	}
	if err != nil {
		return Plan{}, err
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return Plan{}, fmt.Errorf("read %s: %w", File(stateDir), err)
	}
	return p, nil
}
