package datapath

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/identity"
)

// The topology every BPF program test shares: endpoint A runs the
// programs under test, B is another local endpoint, C and D are pods on
// the remote node, and 1.1.1.1 is the world.
var (
	nodeIP   = netip.MustParseAddr("192.168.1.1")
	remoteIP = netip.MustParseAddr("192.168.1.2")
	ipA      = netip.MustParseAddr("10.1.0.10")
	ipB      = netip.MustParseAddr("10.1.0.20")
	ipC      = netip.MustParseAddr("10.2.0.30")
	ipD      = netip.MustParseAddr("10.2.0.40")
	ipWorld  = netip.MustParseAddr("1.1.1.1")

	macA     = net.HardwareAddr{2, 0, 0, 0, 1, 0x0a}
	macB     = net.HardwareAddr{2, 0, 0, 0, 1, 0x14}
	hostMacA = net.HardwareAddr{2, 0, 0, 0, 0xfe, 0x0a}
	hostMacB = net.HardwareAddr{2, 0, 0, 0, 0xfe, 0x14}
	macNext  = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

const (
	epA, epB         = 1, 2
	idA, idB         = 1001, 1002
	idC, idD         = 1003, 1004
	hostIfA, hostIfB = 101, 102
	tunnelIfindex    = 77
)

// Program return codes (linux/pkt_cls.h).
const (
	actOK       = 0
	actShot     = 2
	actRedirect = 7
)

type envOpts struct {
	mode          spec.RoutingMode
	trace         bool
	aggregation   spec.MonitorAggregation
	reportEvery   time.Duration // spec.DefaultReportInterval when unset
	policyIngress bool          // for A
	policyEgress  bool          // for A
	ingressB      bool
	vni           uint32     // tunnel key the overlay harness sets, 0 for none
	tunnelSrc     netip.Addr // the tunnel key's sender; remoteIP when unset
	masquerade    bool
	legacyRouting bool
	netkit        bool   // A's device is a netkit pair
	policyMapMax  uint32 // endpoints' policy map size; 0 for the compiled one
	maglevSize    uint32 // Maglev tables' slots; 0 for the compiled size
	maglevSeed    uint32
}

type env struct {
	t             testing.TB
	maps          *Maps
	fromContainer *ebpf.Program
	toContainer   *ebpf.Program
	fromNetdev    *ebpf.Program
	toNetdev      *ebpf.Program
	fromOverlay   *ebpf.Program
	events        *EventReader
	uplinkIfindex int
	node          NodeConstants // what the programs were loaded with
}

// freshNetNS moves the test's goroutine, locked to its thread, into a new
// network namespace for the rest of the test, so that FIB lookups see only
// routes this test made.
func freshNetNS(t testing.TB) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatalf("current netns: %v", err)
	}
	ns, err := netns.New()
	if err != nil {
		orig.Close()
		t.Fatalf("new netns: %v", err)
	}
	t.Cleanup(func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("restore netns: %v", err) // the thread stays locked and is discarded
			return
		}
		ns.Close()
		orig.Close()
		runtime.UnlockOSThread()
	})
}

// setupRoutes gives the fresh namespace an uplink with the node address,
// a route to the remote pod CIDR and a resolved next hop.
func setupRoutes(t testing.TB) int {
	t.Helper()
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("lo up: %v", err)
	}
	// A veth stands in for the uplink: the kernel may lack the dummy driver.
	up := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "up1"}
	must(t, netlink.LinkAdd(up))
	peer, err := netlink.LinkByName("up1")
	must(t, err)
	must(t, netlink.LinkSetUp(peer))
	link, err := netlink.LinkByName("up0")
	must(t, err)
	must(t, netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: nodeIP.AsSlice(), Mask: net.CIDRMask(24, 32)}}))
	must(t, netlink.LinkSetUp(link))
	must(t, netlink.RouteAdd(&netlink.Route{
		Dst: &net.IPNet{IP: net.IP{10, 2, 0, 0}, Mask: net.CIDRMask(16, 32)},
		Gw:  remoteIP.AsSlice(), LinkIndex: link.Attrs().Index,
	}))
	// The world sits behind the same next hop.
	must(t, netlink.RouteAdd(&netlink.Route{
		Dst: &net.IPNet{IP: net.IP{1, 1, 1, 0}, Mask: net.CIDRMask(24, 32)},
		Gw:  remoteIP.AsSlice(), LinkIndex: link.Attrs().Index,
	}))
	must(t, netlink.NeighAdd(&netlink.Neigh{
		LinkIndex: link.Attrs().Index, IP: remoteIP.AsSlice(), HardwareAddr: macNext,
		State: netlink.NUD_PERMANENT, Family: netlink.FAMILY_V4,
	}))
	must(t, os.WriteFile("/proc/sys/net/ipv4/conf/all/forwarding", []byte("1"), 0o644))
	must(t, os.WriteFile("/proc/sys/net/ipv4/conf/lo/forwarding", []byte("1"), 0o644))
	return link.Attrs().Index
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newEnv loads a fresh collection: new maps, the endpoint programs for A,
// the node programs and the overlay harness, all sharing the maps. It is
// the gate of the program tests (testenv.Privileged): loading programs
// and making a namespace need root.
func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	testenv.Privileged(t)
	freshNetNS(t)
	e := &env{t: t, uplinkIfindex: setupRoutes(t)}
	maps, err := OpenMaps("", WithPolicyMapMax(o.policyMapMax), WithMaglevTableSize(o.maglevSize))
	must(t, err)
	t.Cleanup(func() { maps.Close() })
	e.maps = maps

	node := NodeConstants{NodeIPv4: nodeIP, Mode: o.mode, TunnelIfindex: tunnelIfindex,
		Traces:     spec.Traces{Enabled: o.trace, Aggregation: o.aggregation, ReportFlags: spec.DefaultReportFlags, ReportInterval: o.reportEvery},
		Masquerade: o.masquerade, LegacyRouting: o.legacyRouting, MaglevSeed: o.maglevSeed}
	if node.Traces.ReportInterval == 0 {
		node.Traces.ReportInterval = spec.DefaultReportInterval
	}
	e.node = node
	lxc, err := LoadEndpointPrograms(maps, EndpointConstants{
		NodeConstants: node, ID: epA, Identity: idA, IPv4: ipA,
		PolicyIngress: o.policyIngress, PolicyEgress: o.policyEgress, Netkit: o.netkit,
	})
	must(t, err)
	t.Cleanup(func() { lxc.Close() })
	e.fromContainer, e.toContainer = lxc.FromContainer, lxc.ToContainer

	np, err := LoadNodePrograms(maps, node)
	must(t, err)
	t.Cleanup(func() { np.Close() })
	e.fromNetdev, e.toNetdev = np.FromNetdev, np.ToNetdev
	e.fromOverlay = loadOverlayHarness(t, maps, node, o.vni, o.tunnelSrc)

	must(t, maps.UpsertEndpoint(EndpointEntry{ID: epA, Identity: idA, IPv4: ipA, MAC: macA, HostMAC: hostMacA,
		HostIfindex: hostIfA, PolicyIngress: o.policyIngress, PolicyEgress: o.policyEgress}))
	must(t, maps.UpsertEndpoint(EndpointEntry{ID: epB, Identity: idB, IPv4: ipB, MAC: macB, HostMAC: hostMacB,
		HostIfindex: hostIfB, PolicyIngress: o.ingressB}))
	for p, v := range map[string]spec.IPCacheEntry{
		"10.2.0.30/32":   {Identity: idC, TunnelEndpoint: remoteIP},
		"10.2.0.40/32":   {Identity: idD, TunnelEndpoint: remoteIP},
		"192.168.1.1/32": {Identity: identity.Host},
		"192.168.1.2/32": {Identity: identity.RemoteNode},
		"10.1.0.10/32":   {Identity: idA},
		"10.1.0.20/32":   {Identity: idB},
	} {
		must(t, maps.UpsertIPCache(netip.MustParsePrefix(p), v))
	}
	e.events, err = maps.NewEventReader()
	must(t, err)
	t.Cleanup(func() { e.events.Close() })
	return e
}

func loadOverlayHarness(t testing.TB, maps *Maps, node NodeConstants, vni uint32, src netip.Addr) *ebpf.Program {
	t.Helper()
	cs, err := loadOverlaytest()
	must(t, err)
	if !src.IsValid() {
		src = remoteIP
	}
	var vs overlaytestVariableSpecs
	must(t, cs.Assign(&vs))
	must(t, node.set(nodeVars{
		nodeIPv4: vs.NODE_IPV4, tunnelMode: vs.TUNNEL_MODE, tunnelIfindex: vs.TUNNEL_IFINDEX,
		trace: vs.TRACE_ENABLED, aggregation: vs.MONITOR_AGGREGATION, reportFlags: vs.CT_REPORT_FLAGS,
		reportInterval: vs.CT_REPORT_INTERVAL, masquerade: vs.MASQUERADE, legacyRouting: vs.LEGACY_ROUTING,
		natPortMin: vs.NAT_PORT_MIN, natPortMax: vs.NAT_PORT_MAX,
		nodePortMin: vs.NODEPORT_MIN, nodePortMax: vs.NODEPORT_MAX, maglevSeed: vs.LB_MAGLEV_SEED,
	}))
	must(t, setAll(
		setVar(vs.TEST_VNI, vni),
		setVar(vs.TEST_REMOTE_IPV4, binary.BigEndian.Uint32(src.AsSlice())), // host order
	))
	var objs overlaytestPrograms
	opts, err := maps.useIn(cs)
	must(t, err)
	must(t, cs.LoadAndAssign(&objs, opts))
	t.Cleanup(func() { objs.Close() })
	return objs.TestFromOverlay
}

// run runs prog on the frame and returns its verdict and the frame as the
// program left it.
func (e *env) run(prog *ebpf.Program, frame []byte) (uint32, []byte) {
	e.t.Helper()
	out := make([]byte, len(frame)+256)
	opts := &ebpf.RunOptions{Data: frame, DataOut: out}
	ret, err := prog.Run(opts)
	if err != nil {
		e.t.Fatalf("run %s: %v", prog, err)
	}
	return ret, opts.DataOut
}

// expect runs prog and fails unless it returns want.
func (e *env) expect(prog *ebpf.Program, frame []byte, want uint32) []byte {
	e.t.Helper()
	got, out := e.run(prog, frame)
	if got != want {
		e.t.Fatalf("verdict %d, want %d; events: %+v", got, want, e.drain())
	}
	return out
}

// drain returns every event emitted so far.
func (e *env) drain() []spec.Event {
	e.t.Helper()
	var out []spec.Event
	e.events.SetDeadline(time.Now())
	for {
		ev, err := e.events.Read()
		if errors.Is(err, ErrNoEvent) {
			return out
		}
		if err != nil {
			e.t.Fatalf("read events: %v", err)
		}
		out = append(out, ev)
	}
}

func (e *env) setPolicy(ep uint16, entries ...spec.PolicyEntry) {
	e.t.Helper()
	must(e.t, e.maps.SetPolicy(ep, entries))
}

func (e *env) counter(r spec.Reason, d spec.Direction) Counter {
	e.t.Helper()
	cs, err := e.maps.Counters()
	must(e.t, err)
	for _, c := range cs {
		if c.Reason == r && c.Direction == d {
			return c
		}
	}
	return Counter{Reason: r, Direction: d}
}

// allowed runs p through prog and fails if the program drops it.
func (e *env) allowed(prog *ebpf.Program, p pkt) []byte {
	e.t.Helper()
	got, out := e.run(prog, p.frame(e.t))
	if got == actShot {
		e.t.Fatalf("%v -> %v dropped: %+v", p.src, p.dst, e.drain())
	}
	return out
}

// denied runs p through prog and fails unless it is dropped for reason.
func (e *env) denied(prog *ebpf.Program, p pkt, reason spec.Reason) spec.Event {
	e.t.Helper()
	if got, _ := e.run(prog, p.frame(e.t)); got != actShot {
		e.t.Fatalf("%v -> %v: verdict %d, want drop (%v)", p.src, p.dst, got, reason)
	}
	var drops []spec.Event
	for _, ev := range e.drain() {
		if ev.Type == spec.EventDrop {
			drops = append(drops, ev)
		}
	}
	if len(drops) != 1 || drops[0].Reason != reason {
		e.t.Fatalf("drop events %+v, want one with reason %v", drops, reason)
	}
	return drops[0]
}

type progCase struct {
	name string
	opts envOpts
	run  func(t *testing.T, e *env)
}

func runProgCases(t *testing.T, cases []progCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newEnv(t, c.opts))
		})
	}
}
