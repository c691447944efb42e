package datapath

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// loadBalancerSourceRanges: a fenced frontend (spec.LBSourceRange) admits
// the clients whose address is in one of its ranges, which
// cilium_lb4_source_range holds under its reverse NAT index; the others'
// packets drop as DROP_NOT_IN_SRC_RANGE, wherever they meet the frontend.
var (
	lbIP  = netip.MustParseAddr("198.51.100.11")
	lbTCP = spec.Frontend{Address: lbIP, Port: 7080, Protocol: spec.ProtoTCP}
	// The world's client, 1.1.1.1, is in worldNet, pod A in podNet.
	worldNet = netip.MustParsePrefix("1.1.1.0/24")
	podNet   = netip.MustParsePrefix("10.1.0.0/24")
	elseNet  = netip.MustParsePrefix("192.0.2.0/24")
)

// fence makes f's ranges ps, as the control plane writes them: what goes
// first, then what comes.
func (e *env) fence(f spec.Frontend, ps ...netip.Prefix) {
	e.t.Helper()
	idx := revNATOf(f)
	held, err := e.maps.SourceRanges()
	must(e.t, err)
	for _, r := range held {
		if r.RevNATIndex == idx && !slices.Contains(ps, r.Prefix) {
			must(e.t, e.maps.DeleteSourceRange(r))
		}
	}
	for _, p := range ps {
		must(e.t, e.maps.UpsertSourceRange(spec.SourceRange{RevNATIndex: idx, Prefix: p}))
	}
}

// outOfRange wants the world's SYN to f dropped for its source, naming
// the untranslated packet.
func (e *env) outOfRange(f spec.Frontend, sport uint16) {
	e.t.Helper()
	ev := e.denied(e.fromNetdev, clientSYN(f, sport), spec.DropNotInSourceRange)
	if ev.Src != ipWorld || ev.Dst != f.Address || ev.DstPort != f.Port {
		e.t.Fatalf("drop %+v, want the client's packet to %v", ev, f)
	}
}

func TestPrivilegedProgSourceRanges(t *testing.T) {
	fenced := spec.LBLoadBalancer | spec.LBSourceRange
	runProgCases(t, []progCase{
		// Proves lb4_source_denied in nodeport_ingress: without it the
		// client out of range reaches the backend.
		{"a client in range reaches a LoadBalancer address, one outside is dropped", envOpts{}, func(t *testing.T, e *env) {
			e.serve(lbTCP, fenced, beA)
			e.fence(lbTCP, elseNet, worldNet)
			e.deliveredLocal(clientSYN(lbTCP, 40000), beA)
			// The range goes: new connections and established ones alike
			// are dropped, silently (no ICMP error goes back).
			e.fence(lbTCP, elseNet)
			e.outOfRange(lbTCP, 40001)
			ev := e.denied(e.fromNetdev, outside(toFront(ipWorld, 40000, lbTCP, "A")), spec.DropNotInSourceRange)
			if ev.SrcPort != 40000 {
				t.Fatalf("drop %+v, want the established connection's packet", ev)
			}
			if c := e.counter(spec.DropNotInSourceRange, spec.Ingress); c.Packets != 2 {
				t.Fatalf("counted %d drops, want 2", c.Packets)
			}
		}},
		{"the map holds each fenced frontend's prefixes under its reverse NAT index", envOpts{}, func(t *testing.T, e *env) {
			e.fence(lbTCP, elseNet, worldNet)
			e.fence(extTCP, netip.MustParsePrefix("10.0.0.0/8"))
			got, err := e.maps.SourceRanges()
			must(t, err)
			want := []spec.SourceRange{{RevNATIndex: revNATOf(extTCP), Prefix: netip.MustParsePrefix("10.0.0.0/8")},
				{RevNATIndex: revNATOf(lbTCP), Prefix: worldNet}, {RevNATIndex: revNATOf(lbTCP), Prefix: elseNet}}
			if !slices.Equal(got, want) {
				t.Fatalf("source ranges %v, want %v", got, want)
			}
			if err := e.maps.UpsertSourceRange(spec.SourceRange{RevNATIndex: 1, Prefix: netip.MustParsePrefix("10.0.0.1/8")}); err == nil {
				t.Fatal("a prefix with bits beyond its length was written")
			}
		}},
		// The flag, not the kind: a NodePort is fenced only when the
		// control plane says so (--bpf-lb-source-range-all-types).
		{"a NodePort is fenced only with the flag", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beA)
			e.fence(npTCP, elseNet)
			e.deliveredLocal(clientSYN(npTCP, 40000), beA)
			e.serve(npTCP, spec.LBNodePort|spec.LBSourceRange, beA)
			e.outOfRange(npTCP, 40001)
		}},
		// Proves the check in lb4_local: a pod is judged by its own
		// address, as kube-proxy judges it, and dropped before anything
		// is translated or tracked.
		{"a pod outside the ranges is dropped at its device, one inside is served", envOpts{}, func(t *testing.T, e *env) {
			e.serve(lbTCP, fenced, beC)
			e.fence(lbTCP, worldNet)
			ev := e.denied(e.fromContainer, toFront(ipA, 40000, lbTCP, "S"), spec.DropNotInSourceRange)
			if ev.Src != ipA || ev.Dst != lbIP || ev.SrcIdentity != idA {
				t.Fatalf("drop %+v, want A's packet to the frontend", ev)
			}
			if _, ok := e.serviceEntry(ipA, 40000, lbTCP); ok {
				t.Fatal("the dropped packet made a service entry")
			}
			e.fence(lbTCP, worldNet, podNet)
			if got := e.backendFor(40001, lbTCP); got != ipC {
				t.Fatalf("sent to %v, want the backend %v", got, ipC)
			}
		}},
		// Proves host_fenced in to-netdev: socket balancing leaves the
		// node's connection untranslated when the ranges keep the node
		// out, and it must not leave the node.
		{"the node's packet to a frontend that keeps it out is dropped on the way out", envOpts{}, func(t *testing.T, e *env) {
			e.serve(lbTCP, fenced, beC)
			e.fence(lbTCP, worldNet)
			ev := e.denied(e.toNetdev, tcp(nodeIP, lbIP, 40000, 7080, "S"), spec.DropNotInSourceRange)
			if ev.Src != nodeIP || ev.Dst != lbIP {
				t.Fatalf("drop %+v, want the node's packet to the frontend", ev)
			}
			e.fence(lbTCP, worldNet, netip.PrefixFrom(nodeIP, 32))
			e.expect(e.toNetdev, tcp(nodeIP, lbIP, 40001, 7080, "S").frame(t), actOK)
		}},
	})
}

// A Service's ranges fence every frontend the control plane fenced, and
// nothing else: the client outside them has no way in through any of
// them, and another Service's ranges neither admit it to this one nor
// are narrowed by it.
func TestPrivilegedProgSourceRangeAttacks(t *testing.T) {
	runProgCases(t, []progCase{
		{"no fenced frontend of a service lets the client out of range in", envOpts{}, func(t *testing.T, e *env) {
			fronts := map[spec.Frontend]spec.LBFlags{lbTCP: spec.LBLoadBalancer, extTCP: spec.LBExternalIP,
				npTCP: spec.LBNodePort}
			for f, kind := range fronts {
				e.serve(f, kind|spec.LBSourceRange, beA, beC)
				e.fence(f, elseNet)
			}
			// Another service admits the client: its ranges are its own.
			other := spec.Frontend{Address: lbIP, Port: 443, Protocol: spec.ProtoTCP}
			e.serve(other, spec.LBLoadBalancer|spec.LBSourceRange, beA)
			e.fence(other, worldNet)
			sport := uint16(40000)
			for f := range fronts {
				e.outOfRange(f, sport)
				sport++
			}
			e.deliveredLocal(clientSYN(other, sport), spec.Backend{Address: ipA, Port: 8080})
			// Nor from a pod outside them, through any of them.
			for f := range fronts {
				sport++
				e.denied(e.fromContainer, toFront(ipA, sport, f, "S"), spec.DropNotInSourceRange)
			}
			// The other service's ranges go: it keeps the client out too,
			// and this one's are as they were.
			e.fence(other)
			e.outOfRange(other, sport+1)
			if got, err := e.maps.SourceRanges(); err != nil || len(got) != 3 {
				t.Fatalf("source ranges %v (%v), want this service's three", got, err)
			}
		}},
	})
}
