// Package nodedatapath is the cell that runs this node's datapath
// (internal/datapath) inside the agent: its flags, its start and stop, and
// the views of it that other cells use (endpoint.Datapath for the endpoint
// manager, server.MapLister and server.IPCacheLister for the API).
package nodedatapath

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/l2announce"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	"github.com/cilium-go/cilium/pkg/node"
	"github.com/cilium-go/cilium/pkg/paths"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
)

// Cell starts the datapath when the agent starts.
var Cell = cell.Module("datapath", "The eBPF datapath of this node",
	cell.Config(DefaultConfig),
	cell.Provide(newNode, asEndpointDatapath, asIPCacheMap, asPolicyMap, asServiceMaps, asL2Datapath, newNodeAddresses, newSockets, asRoutes, asMapLister, asIPCacheLister, asConntrack, newNodeInfo, newPodDevices, newHealthDatapath, restoredCIDRs),
	health.JobGroup,
	cell.Invoke(registerMetrics, registerConntrackGC),
)

// Config is the node's datapath configuration.
type Config struct {
	NodeIPv4             string `mapstructure:"node-ipv4"`
	Uplink               string `mapstructure:"uplink"`
	RoutingMode          string `mapstructure:"routing-mode"`
	TunnelPort           int    `mapstructure:"tunnel-port"`
	EnableIPv4Masquerade bool   `mapstructure:"enable-ipv4-masquerade"`
	// EnableIPv4 and EnableIPv6 are Cilium's address family switches, which
	// Cilium's tools read from cilium-config: cilium-go is IPv4-only, so
	// IPv4 must stay on and IPv6 off.
	EnableIPv4 bool `mapstructure:"enable-ipv4"`
	EnableIPv6 bool `mapstructure:"enable-ipv6"`
	// EnableHostLegacyRouting sends pod traffic through the node's stack
	// (netfilter, kube-proxy) instead of around it.
	EnableHostLegacyRouting bool `mapstructure:"enable-host-legacy-routing"`
	// NodeNetNS lets the agent program a node whose network namespace
	// it does not run in.
	NodeNetNS string `mapstructure:"node-netns"`
	// DatapathMode is the kind of device pair new pods get, as Cilium's
	// flag of that name: veth, or netkit, whose pod side runs the
	// datapath as the pod transmits (no crossing of the host's backlog).
	DatapathMode string `mapstructure:"datapath-mode"`
	// ConntrackGCInterval is the longest wait between two collections of
	// expired conntrack entries; busy tables are collected more often.
	ConntrackGCInterval time.Duration `mapstructure:"conntrack-gc-interval"`
	// CgroupRoot is the cgroup v2 directory whose processes get
	// socket-level service balancing (--bpf-lb-sock), as Cilium's flag.
	CgroupRoot string `mapstructure:"cgroup-root"`
	// MonitorAggregation thins the traces of forwarded packets, as
	// Cilium's flags of these names: a level, the TCP flags that are
	// news, and how long a connection stays quiet at most.
	MonitorAggregation         string        `mapstructure:"monitor-aggregation"`
	MonitorAggregationFlags    []string      `mapstructure:"monitor-aggregation-flags"`
	MonitorAggregationInterval time.Duration `mapstructure:"monitor-aggregation-interval"`
}

// TracesWanted says that a cell reads the traces of forwarded packets
// (Hubble): without it the datapath emits drops and policy verdicts only.
type TracesWanted bool

// DefaultConfig follows Cilium's defaults: tunnel mode, masquerading on,
// and legacy host routing while kube-proxy (not the datapath) balances
// Services.
var DefaultConfig = Config{
	Uplink:                  "eth0",
	RoutingMode:             "tunnel",
	TunnelPort:              datapath.DefaultTunnelPort,
	EnableIPv4Masquerade:    true,
	EnableIPv4:              true,
	EnableHostLegacyRouting: true,
	DatapathMode:            string(podlink.DeviceVeth),
	ConntrackGCInterval:     DefaultConntrackGCInterval,
	// Cilium's Helm chart's: the agent's own flag defaults to none.
	MonitorAggregation:         "medium",
	MonitorAggregationFlags:    []string{"syn", "fin", "rst"},
	MonitorAggregationInterval: spec.DefaultReportInterval,
}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("node-ipv4", d.NodeIPv4, "this node's IPv4 address on the uplink (required)")
	fs.String("uplink", d.Uplink, "the device that connects this node to the others")
	fs.String("routing-mode", d.RoutingMode, "how pod traffic crosses nodes: tunnel or native")
	fs.Int("tunnel-port", d.TunnelPort, "VXLAN UDP port in tunnel mode")
	fs.Bool("enable-ipv4-masquerade", d.EnableIPv4Masquerade, "masquerade pod traffic leaving the cluster to the node address")
	fs.Bool("enable-ipv4", d.EnableIPv4, "IPv4 addressing of pods (cilium-go is IPv4-only: it must stay on)")
	fs.Bool("enable-ipv6", d.EnableIPv6, "IPv6 addressing of pods (not in cilium-go: it must stay off)")
	fs.Bool("enable-host-legacy-routing", d.EnableHostLegacyRouting,
		"route pod traffic through the node's network stack, so that netfilter (kube-proxy) sees it; off: the datapath forwards around the stack")
	fs.String("node-netns", d.NodeNetNS, "path of the node's network namespace; empty for the agent's own")
	fs.String("datapath-mode", d.DatapathMode,
		"the device pair new pods get: veth, or netkit (a kernel with CONFIG_NETKIT, 6.7 or later; the agent refuses to start without it)")
	fs.Duration("conntrack-gc-interval", d.ConntrackGCInterval, "the longest wait between two collections of expired connection tracking entries (busy tables are collected more often, down to 5s)")
	fs.String("cgroup-root", d.CgroupRoot,
		"the cgroup v2 directory whose processes (the node's, its pods') get socket-level service balancing with --bpf-lb-sock")
	fs.String("monitor-aggregation", d.MonitorAggregation,
		"how traces of forwarded packets are thinned: none (every packet), lowest or low (not where packets arrive), medium or maximum (a connection's news only)")
	fs.StringSlice("monitor-aggregation-flags", d.MonitorAggregationFlags,
		"TCP flags whose first sighting in a direction of a connection is traced at medium aggregation: fin, syn, rst, psh, ack, urg, ece, cwr, all, none")
	fs.Duration("monitor-aggregation-interval", d.MonitorAggregationInterval,
		"at medium aggregation, how long a connection's direction goes untraced at most (whole seconds)")
}

// traces turns the monitor aggregation flags into the datapath's.
func (c Config) traces() (spec.Traces, error) {
	level, err := spec.ParseMonitorAggregation(c.MonitorAggregation)
	if err != nil {
		return spec.Traces{}, fmt.Errorf("--monitor-aggregation: %w", err)
	}
	flags, err := spec.ParseTCPFlags(c.MonitorAggregationFlags)
	if err != nil {
		return spec.Traces{}, fmt.Errorf("--monitor-aggregation-flags: %w", err)
	}
	if c.MonitorAggregationInterval < time.Second {
		return spec.Traces{}, fmt.Errorf("--monitor-aggregation-interval %s: want 1s or more", c.MonitorAggregationInterval)
	}
	return spec.Traces{Aggregation: level, ReportFlags: flags,
		ReportInterval: c.MonitorAggregationInterval}, nil
}

// Datapath turns the flags into the datapath's configuration, naming the
// first bad flag.
func (c Config) Datapath(p paths.Config, lb loadbalancer.Config, pol policyagent.MapConfig) (datapath.Config, error) {
	if !c.EnableIPv4 || c.EnableIPv6 {
		return datapath.Config{}, fmt.Errorf("--enable-ipv4=%t --enable-ipv6=%t: cilium-go is IPv4-only (--enable-ipv4=true --enable-ipv6=false)", c.EnableIPv4, c.EnableIPv6)
	}
	ip, err := netip.ParseAddr(c.NodeIPv4)
	if err != nil || !ip.Is4() {
		return datapath.Config{}, fmt.Errorf("--node-ipv4 %q: an IPv4 address is required", c.NodeIPv4)
	}
	if c.Uplink == "" {
		return datapath.Config{}, fmt.Errorf("--uplink: required")
	}
	mode, err := spec.ParseRoutingMode(c.RoutingMode)
	if err != nil {
		return datapath.Config{}, fmt.Errorf("--routing-mode %q: want tunnel or native", c.RoutingMode)
	}
	if c.TunnelPort < 1 || c.TunnelPort > 65535 {
		return datapath.Config{}, fmt.Errorf("--tunnel-port %d: want 1-65535", c.TunnelPort)
	}
	if c.ConntrackGCInterval <= 0 {
		return datapath.Config{}, fmt.Errorf("--conntrack-gc-interval %s: want a positive duration", c.ConntrackGCInterval)
	}
	if c.NodeNetNS != "" && !filepath.IsAbs(c.NodeNetNS) {
		return datapath.Config{}, fmt.Errorf("--node-netns %q: an absolute path is required", c.NodeNetNS)
	}
	device, err := podlink.ParseDevice(c.DatapathMode)
	if err != nil {
		return datapath.Config{}, fmt.Errorf("--datapath-mode %q: want veth or netkit", c.DatapathMode)
	}
	if err := lb.Validate(); err != nil {
		return datapath.Config{}, err
	}
	nodePorts, _ := lb.NodePorts() // valid: Validate checked it
	socketLB := lb.KubeProxyReplacement && lb.BPFLBSock
	if socketLB && c.CgroupRoot == "" {
		return datapath.Config{}, fmt.Errorf("--bpf-lb-sock: needs --cgroup-root, the cgroup v2 directory of the processes to balance" +
			" (/sys/fs/cgroup for the whole machine), or --bpf-lb-sock=false")
	}
	if c.CgroupRoot != "" && !filepath.IsAbs(c.CgroupRoot) {
		return datapath.Config{}, fmt.Errorf("--cgroup-root %q: an absolute path is required", c.CgroupRoot)
	}
	traces, err := c.traces()
	if err != nil {
		return datapath.Config{}, err
	}
	seeds, _ := lb.MaglevSeeds() // valid: Validate checked it
	return datapath.Config{BPFFSDir: p.BPFRoot, NetNS: c.NodeNetNS, NodeIPv4: ip, Uplink: c.Uplink, Traces: traces,
		Mode: mode, TunnelPort: c.TunnelPort, Masquerade: c.EnableIPv4Masquerade,
		LegacyRouting: c.EnableHostLegacyRouting, PodDevice: device,
		SocketLB: socketLB, CgroupRoot: c.CgroupRoot, LBMapMax: uint32(lb.BPFLBMapMax), PolicyMapMax: uint32(pol.BPFPolicyMapMax),
		NodePorts:       datapath.PortRange{Min: nodePorts.Min, Max: nodePorts.Max},
		MaglevTableSize: uint32(lb.BPFLBMaglevTableSize), MaglevSeed: seeds.Flow}, nil
}

type nodeParams struct {
	cell.In
	Config    Config
	LB        loadbalancer.Config
	PolicyMap policyagent.MapConfig
	Paths     paths.Config
	Log       *slog.Logger
	Lifecycle cell.Lifecycle
	Health    cell.Health
	Traces    TracesWanted `optional:"true"`
}

func newNode(p nodeParams) (*datapath.Node, error) {
	cfg, err := p.Config.Datapath(p.Paths, p.LB, p.PolicyMap)
	if err != nil {
		return nil, err
	}
	cfg.Traces.Enabled = bool(p.Traces)
	n, err := datapath.NewNode(cfg, p.Log)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			// Start checks that the directory is on a bpffs.
			if err := os.MkdirAll(cfg.BPFFSDir, 0o700); err != nil {
				return fmt.Errorf("--bpf-root: %w", err)
			}
			if err := n.Start(); err != nil {
				return fmt.Errorf("start datapath: %w", err)
			}
			p.Health.OK("datapath started")
			return nil
		},
		// Close, not Teardown: pinned maps and links keep the pods'
		// traffic flowing while the agent is away.
		OnStop: func(cell.HookContext) error { return n.Close() },
	})
	return n, nil
}

// The reconcilers' targets: the endpoint manager's, the ipcache's and
// the remote nodes'.
func asEndpointDatapath(n *datapath.Node) endpoint.Datapath { return n }

func asRoutes(n *datapath.Node) node.Routes { return n }

// asIPCacheMap: the datapath opens its maps when it starts, after the
// ipcache reconciler was registered.
func asIPCacheMap(n *datapath.Node) ipcache.MapSource {
	return func() ipcache.Map {
		if m := n.Maps(); m != nil {
			return m
		}
		return nil
	}
}

// asPolicyMap: as asIPCacheMap, for the policy reconciler.
func asPolicyMap(n *datapath.Node) policyagent.MapSource {
	return func() policyagent.Map {
		if m := n.Maps(); m != nil {
			return m
		}
		return nil
	}
}

// asServiceMaps: as asIPCacheMap, for the load balancer's reconcilers.
func asServiceMaps(n *datapath.Node) loadbalancer.MapSource {
	return func() loadbalancer.Map {
		if m := n.Maps(); m != nil {
			return m
		}
		return nil
	}
}

// asL2Datapath: the responder map opens with the others, when the
// datapath starts.
func asL2Datapath(n *datapath.Node) l2announce.Datapath { return l2Datapath{n} }

type l2Datapath struct{ *datapath.Node }

func (d l2Datapath) Map() l2announce.Map {
	if m := d.Maps(); m != nil {
		return m
	}
	return nil
}

// newNodeAddresses: NodePorts and hostPorts answer at the node's
// address and at its devices' other addresses, as read at the start.
func newNodeAddresses(c Config) (loadbalancer.NodeAddresses, error) {
	var out loadbalancer.NodeAddresses
	if ip, err := netip.ParseAddr(c.NodeIPv4); err == nil && ip.Is4() {
		out = append(out, ip)
	}
	others, err := datapath.HostAddresses(c.NodeNetNS)
	if err != nil {
		return nil, fmt.Errorf("the node's addresses: %w", err)
	}
	for _, ip := range others {
		if !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out, nil
}

// nodeInfo answers the API's questions about the node; it reads the
// kernel once, after the datapath started, so that no API request waits
// for the datapath's node, which runs one method at a time (an endpoint's
// programs may be loading).
type nodeInfo struct {
	mtu    atomic.Int64
	device podlink.Device
}

func (i *nodeInfo) PodMTU() int       { return int(i.mtu.Load()) }
func (i *nodeInfo) PodDevice() string { return string(i.device) }

func newNodeInfo(n *datapath.Node, lc cell.Lifecycle) server.NodeInfo {
	i := &nodeInfo{device: n.PodDevice()}
	lc.Append(cell.Hook{OnStart: func(cell.HookContext) error {
		mtu, err := n.PodMTU()
		if err != nil {
			return err
		}
		i.mtu.Store(int64(mtu))
		return nil
	}})
	return i
}

// podDevices checks API requests' devices against the kernel, in the
// node's namespace; the uplink and the tunnel device are never a pod's.
type podDevices struct{ cfg datapath.Config }

func newPodDevices(c Config, p paths.Config, lb loadbalancer.Config, pol policyagent.MapConfig) (server.PodDeviceChecker, error) {
	cfg, err := c.Datapath(p, lb, pol)
	return podDevices{cfg: cfg}, err
}

func (d podDevices) CheckPodDevice(name string, ifindex int) error {
	tunnel := d.cfg.TunnelDevice
	if tunnel == "" {
		tunnel = datapath.DefaultTunnelDevice
	}
	return podlink.CheckPodDevice(d.cfg.NetNS, name, ifindex, d.cfg.Uplink, tunnel)
}

type mapLister struct {
	n   *datapath.Node
	dir string
}

func asMapLister(n *datapath.Node, p paths.Config) server.MapLister {
	return mapLister{n: n, dir: filepath.Join(p.BPFRoot, "maps")}
}

func (l mapLister) ListMaps() ([]models.BPFMap, error) {
	maps := l.n.Maps()
	if maps == nil {
		return []models.BPFMap{}, nil
	}
	sums, err := maps.Summaries()
	if err != nil {
		return nil, err
	}
	out := make([]models.BPFMap, 0, len(sums))
	for _, s := range sums {
		pin := s.Name
		if s.In != "" {
			pin = s.In
		}
		out = append(out, models.BPFMap{Name: s.Name, Path: filepath.Join(l.dir, pin), Type: s.Type,
			MaxEntries: s.MaxEntries, Entries: s.Entries})
	}
	return out, nil
}
