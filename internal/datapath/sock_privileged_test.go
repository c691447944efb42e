package datapath

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/identity"
)

// The test world: a namespace whose lo holds two backends, each serving
// TCP on :8080 and UDP on :5353 and answering with its name, and a cgroup
// of the test's own with the socket programs on it. No route leads to the
// service addresses: only a translated socket reaches anything there.
var (
	backendB1 = netip.MustParseAddr("10.0.0.2")
	backendB2 = netip.MustParseAddr("10.0.0.3")
)

type sockWorld struct {
	ns       string
	cgroup   string
	linksDir string
	maps     *Maps
	opts     SocketOptions
}

// newSockWorld attaches the socket programs, with traces or without.
func newSockWorld(t *testing.T, traces bool) *sockWorld {
	t.Helper()
	w := &sockWorld{ns: testenv.NewNetNS(t)}
	nl, err := netnamespace.Netlink(w.ns)
	must(t, err)
	t.Cleanup(func() { nl.Close() })
	lo, err := nl.LinkByName("lo")
	must(t, err)
	for name, a := range map[string]netip.Addr{"b1": backendB1, "b2": backendB2} {
		must(t, nl.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}}))
		serveTCP(t, w.ns, netip.AddrPortFrom(a, 8080), name)
		serveUDP(t, w.ns, netip.AddrPortFrom(a, 5353), name)
	}
	w.maps, err = OpenMaps("")
	must(t, err)
	t.Cleanup(func() { w.maps.Close() })
	w.linksDir = testnode.TempBPFFS(t)
	w.cgroup = newTestCgroup(t)
	cookie, err := NetNSCookie(w.ns)
	must(t, err)
	w.opts = SocketOptions{HostNetNS: cookie, Traces: traces}
	must(t, AttachSocketLB(w.maps, w.linksDir, w.cgroup, w.opts))
	// Registered after the cgroup's removal, so it runs before.
	t.Cleanup(func() {
		if err := DetachSocketLB(w.linksDir); err != nil {
			t.Error(err)
		}
	})
	return w
}

// newTestCgroup makes a cgroup v2 directory for the test, under wherever
// cgroup2 is mounted, and removes it when the test ends (its processes
// must have ended by then).
func newTestCgroup(t *testing.T) string {
	t.Helper()
	root, err := Cgroup2Root()
	if err != nil {
		t.Fatal(err) // cgroup v2 is a requirement (README), not an option
	}
	dir, err := os.MkdirTemp(root, "cilium-go-socktest-")
	must(t, err)
	t.Cleanup(func() {
		// A child just reaped may still hold the cgroup for a moment.
		testenv.Eventually(t, 5*time.Second, func() error {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return nil
		})
	})
	return dir
}

// inNS runs fn in ns and returns its value.
func inNS[T any](t *testing.T, ns string, fn func() (T, error)) T {
	t.Helper()
	var v T
	testenv.InNetNS(t, ns, func() error {
		var err error
		v, err = fn()
		return err
	})
	return v
}

// serveTCP answers every connection to at with name and closes it.
func serveTCP(t *testing.T, ns string, at netip.AddrPort, name string) {
	t.Helper()
	ln := inNS(t, ns, func() (net.Listener, error) { return net.Listen("tcp4", at.String()) })
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(name + "\n"))
			c.Close()
		}
	}()
}

// serveUDP answers every datagram to at with name.
func serveUDP(t *testing.T, ns string, at netip.AddrPort, name string) {
	t.Helper()
	pc := inNS(t, ns, func() (net.PacketConn, error) { return net.ListenPacket("udp4", at.String()) })
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(name), from)
		}
	}()
}

// service writes a frontend with backends (ids 1.. in the order given,
// each at port 8080 for TCP or 5353 for UDP) and its reverse NAT entry.
func (w *sockWorld) service(t *testing.T, front netip.AddrPort, proto uint8, index uint16, flags spec.LBFlags,
	backends ...netip.Addr) {
	t.Helper()
	port := uint16(8080)
	if proto == spec.ProtoUDP {
		port = 5353
	}
	s := spec.Service{Frontend: spec.Frontend{Address: front.Addr(), Port: front.Port(), Protocol: proto},
		RevNATIndex: index, Flags: flags}
	if flags&spec.LBAffinity != 0 {
		s.AffinityTimeout = 60
	}
	for _, a := range backends {
		id := spec.BackendID(index)<<8 | spec.BackendID(len(s.Backends)+1)
		must(t, w.maps.UpsertBackend(spec.Backend{ID: id, Address: a, Port: port, Protocol: proto}))
		s.Backends = append(s.Backends, id)
	}
	must(t, w.maps.UpsertService(s))
	must(t, w.maps.UpsertRevNAT(spec.RevNAT{Index: index, Address: front.Addr(), Port: front.Port()}))
}

func wantResult(t *testing.T, got sockResult, peer, reply string) {
	t.Helper()
	if got.Errno != "" || got.Err != "" || got.Peer != peer || got.Reply != reply {
		t.Errorf("%s: %+v, want peer %s and reply %q", got.Step, got, peer, reply)
	}
}

// TestPrivilegedSocketLBTraces: with traces, a translated connect is
// recorded before (to the frontend) and after (to the backend it went
// to), both naming the service; one refused for want of a backend only
// before; a call to no frontend not at all.
func TestPrivilegedSocketLBTraces(t *testing.T) {
	testenv.Privileged(t)
	w := newSockWorld(t, true)
	w.service(t, netip.MustParseAddrPort("10.96.0.1:80"), spec.ProtoTCP, 7, 0, backendB2)
	w.service(t, netip.MustParseAddrPort("10.96.0.2:53"), spec.ProtoUDP, 8, 0)
	events, err := w.maps.NewEventReader()
	must(t, err)
	defer events.Close()

	runSockClient(t, w.ns, w.cgroup, "tcp:10.96.0.1:80", "udp:10.96.0.2:53", "tcp:10.0.0.3:8080")
	var got []spec.Event
	events.SetDeadline(time.Now().Add(time.Second))
	for {
		ev, err := events.Read()
		if errors.Is(err, ErrNoEvent) {
			break
		}
		must(t, err)
		got = append(got, ev)
	}
	cookie, err := NetNSCookie(w.ns)
	must(t, err)
	for _, ev := range got {
		if ev.NetNSCookie != cookie {
			t.Fatalf("event %+v: the caller's namespace %d, want %d", ev, ev.NetNSCookie, cookie)
		}
	}
	type sockTrace struct {
		xlate spec.SockXlatePoint
		dst   netip.AddrPort
		proto uint8
		rev   uint16
	}
	var traces []sockTrace
	for _, ev := range got {
		if ev.Type != spec.EventTraceSock {
			t.Fatalf("event %+v, want socket traces only", ev)
		}
		traces = append(traces, sockTrace{ev.Xlate, netip.AddrPortFrom(ev.Dst, ev.DstPort), ev.Protocol, ev.RevNAT})
	}
	want := []sockTrace{
		{spec.SockPreForward, netip.MustParseAddrPort("10.96.0.1:80"), spec.ProtoTCP, 7},
		{spec.SockPostForward, netip.MustParseAddrPort("10.0.0.3:8080"), spec.ProtoTCP, 7},
		{spec.SockPreForward, netip.MustParseAddrPort("10.96.0.2:53"), spec.ProtoUDP, 8},
	}
	if !slices.Equal(traces, want) {
		t.Fatalf("socket traces\n%+v\nwant\n%+v", traces, want)
	}
}

// TestPrivilegedSocketLB plays the node's processes: inside the cgroup
// they reach a service's backend through its frontend and see the
// frontend as their peer; outside it nothing is translated.
func TestPrivilegedSocketLB(t *testing.T) {
	testenv.Privileged(t) // creates a namespace, a cgroup and BPF programs
	w := newSockWorld(t, false)
	w.service(t, netip.MustParseAddrPort("10.96.0.1:80"), spec.ProtoTCP, 1, 0, backendB1)
	w.service(t, netip.MustParseAddrPort("10.96.0.1:53"), spec.ProtoUDP, 2, 0, backendB1)
	w.service(t, netip.MustParseAddrPort("10.96.0.2:80"), spec.ProtoTCP, 3, 0)
	w.service(t, netip.MustParseAddrPort("10.96.0.2:53"), spec.ProtoUDP, 4, 0)
	w.service(t, netip.MustParseAddrPort("10.96.0.3:80"), spec.ProtoTCP, 5, spec.LBAffinity, backendB1, backendB2)

	t.Run("TCP", func(t *testing.T) {
		got := runSockClient(t, w.ns, w.cgroup, "tcp:10.96.0.1:80", "tcp:10.0.0.3:8080")
		wantResult(t, got[0], "10.96.0.1:80", "b1")
		// A connection to a backend's own address is nobody's business.
		wantResult(t, got[1], "10.0.0.3:8080", "b2")
	})
	t.Run("UDP", func(t *testing.T) {
		got := runSockClient(t, w.ns, w.cgroup, "udp:10.96.0.1:53", "udpconn:10.96.0.1:53")
		wantResult(t, got[0], "10.96.0.1:53", "b1")
		wantResult(t, got[1], "10.96.0.1:53", "b1")
	})
	t.Run("NoBackend", func(t *testing.T) {
		got := runSockClient(t, w.ns, w.cgroup, "tcp:10.96.0.2:80", "udp:10.96.0.2:53", "udpconn:10.96.0.2:53")
		for _, r := range got {
			if r.Errno != "ECONNREFUSED" || r.Millis > 500 {
				t.Errorf("%s: %+v, want ECONNREFUSED at once", r.Step, r)
			}
		}
	})
	t.Run("Affinity", func(t *testing.T) {
		steps := slices.Repeat([]string{"tcp:10.96.0.3:80"}, 8)
		got := runSockClient(t, w.ns, w.cgroup, steps...)
		for _, r := range got {
			if r.Errno != "" || r.Err != "" || r.Peer != "10.96.0.3:80" || r.Reply != got[0].Reply {
				t.Fatalf("connections of one namespace went to different backends or failed: %+v", got)
			}
		}
		// The client is its namespace, named by cookie.
		var k lxcLbAffinityKey
		var v lxcLbAffinityValue
		it := w.maps.LBAffinity.Iterate()
		n := 0
		for it.Next(&k, &v) {
			n++
			if k.RevNatIndex != 5 || k.ByCookie != 1 || k.Client == 0 {
				t.Errorf("affinity entry %+v", k)
			}
		}
		must(t, it.Err())
		if n != 1 {
			t.Errorf("%d affinity entries, want 1", n)
		}
	})
	// A NodePort answers at every node's address: the frontend at the
	// unspecified address serves a connection to another node's address
	// (the ipcache names it remote-node), and the socket sees that
	// address as its peer; an address that is no node's is not a NodePort.
	t.Run("NodePortAtAnyNode", func(t *testing.T) {
		w.service(t, netip.AddrPortFrom(spec.AnyNode, 30080), spec.ProtoTCP, 6, spec.LBNodePort, backendB1)
		must(t, w.maps.UpsertIPCache(netip.MustParsePrefix("192.0.2.7/32"), spec.IPCacheEntry{Identity: identity.RemoteNode}))
		got := runSockClient(t, w.ns, w.cgroup, "tcp:192.0.2.7:30080", "tcp:198.51.100.1:30080")
		wantResult(t, got[0], "192.0.2.7:30080", "b1")
		if got[1].Errno != "ENETUNREACH" {
			t.Errorf("%s: %+v, want ENETUNREACH: no node, no NodePort", got[1].Step, got[1])
		}
	})
	// A HostPort at hostIP 127.0.0.1 is the node's: its namespace's
	// processes reach the pod there, while a pod's own loopback, in
	// another namespace of the same cgroup, stays its own.
	t.Run("Loopback", func(t *testing.T) {
		w.service(t, netip.MustParseAddrPort("127.0.0.1:54323"), spec.ProtoTCP, 7, spec.LBHostPort, backendB1)
		w.service(t, netip.MustParseAddrPort("127.0.0.1:54323"), spec.ProtoUDP, 8, spec.LBHostPort, backendB1)
		pod := testenv.NewNetNS(t)
		serveTCP(t, pod, netip.MustParseAddrPort("127.0.0.1:54323"), "pod")
		serveUDP(t, pod, netip.MustParseAddrPort("127.0.0.1:54323"), "pod")
		got := runSockClient(t, w.ns, w.cgroup, "tcp:127.0.0.1:54323", "udp:127.0.0.1:54323")
		wantResult(t, got[0], "127.0.0.1:54323", "b1")
		wantResult(t, got[1], "127.0.0.1:54323", "b1")
		got = runSockClient(t, pod, w.cgroup, "tcp:127.0.0.1:54323", "udp:127.0.0.1:54323")
		wantResult(t, got[0], "127.0.0.1:54323", "pod")
		wantResult(t, got[1], "127.0.0.1:54323", "pod")
	})
	t.Run("OutsideTheCgroup", func(t *testing.T) {
		got := runSockClient(t, w.ns, "", "tcp:10.96.0.1:80", "udp:10.96.0.1:53")
		// Untranslated, the frontend is an address no route leads to.
		for _, r := range got {
			if r.Errno != "ENETUNREACH" {
				t.Errorf("%s from outside the cgroup: %+v, want ENETUNREACH", r.Step, r)
			}
		}
	})
}

// cgroupPrograms are the ids of the programs on each socket hook of cgroup.
func cgroupPrograms(t *testing.T, cgroup string) map[ebpf.AttachType][]ebpf.ProgramID {
	t.Helper()
	dir, err := os.Open(cgroup)
	must(t, err)
	defer dir.Close()
	out := map[ebpf.AttachType][]ebpf.ProgramID{}
	for _, h := range socketHooks {
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(dir.Fd()), Attach: h.at})
		must(t, err)
		for _, p := range res.Programs {
			out[h.at] = append(out[h.at], p.ID)
		}
	}
	return out
}

// An agent restart attaches again: the pinned links swap their programs,
// each hook keeps one, and the sockets keep being translated. Detach
// leaves the cgroup bare.
func TestPrivilegedSocketLBReattach(t *testing.T) {
	testenv.Privileged(t) // creates a namespace, a cgroup and BPF programs
	w := newSockWorld(t, false)
	w.service(t, netip.MustParseAddrPort("10.96.0.1:80"), spec.ProtoTCP, 1, 0, backendB1)
	before := cgroupPrograms(t, w.cgroup)
	must(t, AttachSocketLB(w.maps, w.linksDir, w.cgroup, w.opts))
	after := cgroupPrograms(t, w.cgroup)
	for _, h := range socketHooks {
		if len(before[h.at]) != 1 || len(after[h.at]) != 1 || before[h.at][0] == after[h.at][0] {
			t.Errorf("%s: programs %v before the second attach, %v after: want one, replaced", h.pin, before[h.at], after[h.at])
		}
	}
	wantResult(t, runSockClient(t, w.ns, w.cgroup, "tcp:10.96.0.1:80")[0], "10.96.0.1:80", "b1")

	// Another cgroup configured: the programs move there.
	other := newTestCgroup(t)
	must(t, AttachSocketLB(w.maps, w.linksDir, other, w.opts))
	for at, ids := range cgroupPrograms(t, w.cgroup) {
		t.Errorf("%s: programs %v left on the old cgroup", at, ids)
	}
	moved := cgroupPrograms(t, other)
	for _, h := range socketHooks {
		if len(moved[h.at]) != 1 {
			t.Errorf("%s: programs %v on the new cgroup, want one", h.pin, moved[h.at])
		}
	}

	must(t, DetachSocketLB(w.linksDir))
	for at, ids := range cgroupPrograms(t, other) {
		t.Errorf("%s: programs %v left after detach", at, ids)
	}
	must(t, DetachSocketLB(w.linksDir)) // twice: no error
}

// A connected UDP socket keeps its backend; when the backend goes, the
// socket is ended, and connecting again picks a live backend. A socket
// connected to the same backend directly stays.
func TestPrivilegedSocketDestroy(t *testing.T) {
	testenv.Privileged(t) // creates a namespace, a cgroup and BPF programs
	w := newSockWorld(t, false)
	front := netip.MustParseAddrPort("10.96.0.1:53")
	w.service(t, front, spec.ProtoUDP, 1, 0, backendB1)
	gone := netip.AddrPortFrom(backendB1, 5353)
	direct := inNS(t, w.ns, func() (*net.UDPConn, error) { return net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(gone)) })
	t.Cleanup(func() { direct.Close() })

	c := startSockClient(t, w.ns, w.cgroup, "udpconn:10.96.0.1:53", "wait", "udprecv", "udpconn:10.96.0.1:53")
	wantResult(t, c.next(t), "10.96.0.1:53", "b1")
	c.next(t) // waiting

	w.service(t, front, spec.ProtoUDP, 1, 0, backendB2)
	n, err := w.maps.DestroySocketsTo(w.ns, gone, spec.ProtoUDP)
	if errors.Is(err, ErrSockDestroyUnsupported) {
		t.Skip(err)
	}
	must(t, err)
	if n != 1 {
		t.Errorf("%d sockets destroyed, want 1", n)
	}
	c.resume(t)
	if r := c.next(t); r.Errno != "ECONNABORTED" {
		t.Errorf("receive after the backend went: %+v, want ECONNABORTED", r)
	}
	wantResult(t, c.next(t), "10.96.0.1:53", "b2")

	// The directly connected socket still talks to its backend.
	if _, err := direct.Write([]byte("ping")); err != nil {
		t.Fatalf("direct socket: %v", err)
	}
	must(t, direct.SetReadDeadline(time.Now().Add(2*time.Second)))
	buf := make([]byte, 8)
	if n, err := direct.Read(buf); err != nil || string(buf[:n]) != "b1" {
		t.Errorf("direct socket after destroy: %q, %v", buf[:n], err)
	}
	if _, err := w.maps.DestroySocketsTo(w.ns, gone, spec.ProtoTCP); err == nil {
		t.Error("TCP sockets destroyed")
	}
}

// Node.Start attaches the socket programs when configured, and Teardown
// takes them away.
func TestPrivilegedNodeSocketLB(t *testing.T) {
	testenv.Privileged(t) // creates a namespace, a cgroup, links and BPF programs
	ns := testenv.NewNetNS(t)
	must(t, testnode.AddUplink(ns, "192.168.77.1/24"))
	cgroup := newTestCgroup(t)
	node, err := NewNode(Config{BPFFSDir: testnode.TempBPFFS(t), NetNS: ns, NodeIPv4: netip.MustParseAddr("192.168.77.1"),
		Uplink: "eth0", Mode: spec.Native, SocketLB: true, CgroupRoot: cgroup},
		slog.New(slog.DiscardHandler))
	must(t, err)
	t.Cleanup(func() { node.Teardown() })
	must(t, node.Start())
	must(t, node.Start()) // a restart
	for _, h := range socketHooks {
		if _, err := os.Stat(filepath.Join(node.linksDir(), h.pin)); err != nil {
			t.Errorf("link pin: %v", err)
		}
	}
	for _, h := range socketHooks {
		if ids := cgroupPrograms(t, cgroup)[h.at]; len(ids) != 1 {
			t.Errorf("%s: programs %v after two starts, want one", h.pin, ids)
		}
	}
	serveTCP(t, ns, netip.MustParseAddrPort("192.168.77.1:8080"), "node")
	m := node.Maps()
	must(t, m.UpsertBackend(spec.Backend{ID: 1, Address: netip.MustParseAddr("192.168.77.1"), Port: 8080, Protocol: spec.ProtoTCP}))
	must(t, m.UpsertService(spec.Service{Frontend: spec.Frontend{Address: netip.MustParseAddr("10.96.0.9"), Port: 80,
		Protocol: spec.ProtoTCP}, Backends: []spec.BackendID{1}, RevNATIndex: 1}))
	must(t, m.UpsertRevNAT(spec.RevNAT{Index: 1, Address: netip.MustParseAddr("10.96.0.9"), Port: 80}))
	wantResult(t, runSockClient(t, ns, cgroup, "tcp:10.96.0.9:80")[0], "10.96.0.9:80", "node")

	// A start without SocketLB takes away what an earlier one attached.
	node.cfg.SocketLB = false
	must(t, node.Start())
	for at, ids := range cgroupPrograms(t, cgroup) {
		t.Errorf("%s: programs %v left after a start without SocketLB", at, ids)
	}

	node.cfg.SocketLB = true
	must(t, node.Start())
	must(t, node.Teardown())
	for at, ids := range cgroupPrograms(t, cgroup) {
		t.Errorf("%s: programs %v left after teardown", at, ids)
	}
}
