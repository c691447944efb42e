package datapath

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// Maglev: a LoadBalancer address that the network sends a flow to on
// any node. Every node picks the same backend for the flow, from its own
// maps, where the backends have other ids and slots.
var (
	mgVIP    = netip.MustParseAddr("198.51.100.7")
	vipTCP   = spec.Frontend{Address: mgVIP, Port: 80, Protocol: spec.ProtoTCP}
	mgSeed   = uint64(0x5eed)
	mgFlows  = 400
	mgFlags  = spec.LBLoadBalancer | spec.LBMaglev
	mgRemote = func(i int) spec.Backend {
		return spec.Backend{Address: netip.AddrFrom4([4]byte{10, 2, 1, byte(i + 1)}), Port: 8080, Protocol: spec.ProtoTCP}
	}
)

// mgNode is one node's maps and uplink program.
type mgNode struct {
	maps       *Maps
	fromNetdev *ebpf.Program
}

// otherNode loads a second node's maps and node programs beside e's, with
// the same constants (the cluster's seed among them).
func (e *env) otherNode(size uint32) *mgNode {
	e.t.Helper()
	maps, err := OpenMaps("", WithMaglevTableSize(size))
	must(e.t, err)
	e.t.Cleanup(func() { maps.Close() })
	np, err := LoadNodePrograms(maps, e.node)
	must(e.t, err)
	e.t.Cleanup(func() { np.Close() })
	return &mgNode{maps: maps, fromNetdev: np.FromNetdev}
}

// serveMaglev writes f on maps over bs, in slot order, with the Maglev
// table the control plane computes for them (none without spec.LBMaglev
// in flags).
func serveMaglev(t testing.TB, maps *Maps, f spec.Frontend, flags spec.LBFlags, bs []spec.Backend) {
	t.Helper()
	var ids []spec.BackendID
	for _, b := range bs {
		must(t, maps.UpsertBackend(b))
		ids = append(ids, b.ID)
	}
	s := spec.Service{Frontend: f, Backends: ids, RevNATIndex: revNATOf(f), Flags: flags, AffinityTimeout: 60}
	if flags&spec.LBMaglev != 0 {
		s.Maglev = loadbalancer.MaglevTable(bs, maps.MaglevTableSize(), mgSeed)
	}
	must(t, maps.UpsertRevNAT(spec.RevNAT{Index: s.RevNATIndex, Address: f.Address, Port: f.Port}))
	must(t, maps.UpsertService(s))
}

// picks sends the first packet of flows 0..n-1 (clients in 1.1.1.0/24,
// every port its own flow) to f through prog and returns the backend
// each went to.
func (e *env) picks(prog *ebpf.Program, f spec.Frontend, n int, sameClient bool) []netip.Addr {
	e.t.Helper()
	out := make([]netip.Addr, n)
	for i := range n {
		client := netip.AddrFrom4([4]byte{1, 1, 1, byte(i%200 + 2)})
		if sameClient {
			client = ipWorld
		}
		_, dst, _ := e.sends(prog, outside(toFront(client, uint16(20000+i), f, "S")), actRedirect)
		out[i] = dst.Addr()
	}
	return out
}

// backendsOf are n remote backends, numbered from firstID.
func backendsOf(n, firstID int) []spec.Backend {
	bs := make([]spec.Backend, n)
	for i := range bs {
		bs[i] = mgRemote(i)
		bs[i].ID = spec.BackendID(firstID + i)
	}
	return bs
}

// otherNodes are the backends of backendsOf(n, 1) as another node holds
// them: other ids, in the other order.
func otherNodes(n int) []spec.Backend {
	out := backendsOf(n, 500)
	slices.Reverse(out)
	return out
}

// share counts the flows each backend got.
func share(picks []netip.Addr) map[netip.Addr]int {
	out := map[netip.Addr]int{}
	for _, a := range picks {
		out[a]++
	}
	return out
}

func TestPrivilegedProgMaglev(t *testing.T) {
	const n = 10
	runProgCases(t, []progCase{
		// Proves LB_F_MAGLEV's pick: by random slots (the next case)
		// the two nodes disagree on most flows.
		{"two nodes send every flow to the same backend", envOpts{maglevSize: 1021, maglevSeed: 7}, func(t *testing.T, e *env) {
			other := e.otherNode(1021)
			serveMaglev(t, e.maps, vipTCP, mgFlags, backendsOf(n, 1))
			serveMaglev(t, other.maps, vipTCP, mgFlags, otherNodes(n))
			a, b := e.picks(e.fromNetdev, vipTCP, mgFlows, false), e.picks(other.fromNetdev, vipTCP, mgFlows, false)
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("flow %d: node 1 sends it to %s, node 2 to %s", i, a[i], b[i])
				}
			}
			if s := share(a); len(s) != n {
				t.Fatalf("%d flows reached %d of %d backends: %v", mgFlows, len(s), n, s)
			}
		}},
		{"without Maglev the nodes pick at random", envOpts{maglevSize: 1021, maglevSeed: 7}, func(t *testing.T, e *env) {
			other := e.otherNode(1021)
			serveMaglev(t, e.maps, vipTCP, spec.LBLoadBalancer, backendsOf(n, 1))
			serveMaglev(t, other.maps, vipTCP, spec.LBLoadBalancer, otherNodes(n))
			a, b := e.picks(e.fromNetdev, vipTCP, mgFlows, false), e.picks(other.fromNetdev, vipTCP, mgFlows, false)
			same := 0
			for i := range a {
				if a[i] == b[i] {
					same++
				}
			}
			if same > mgFlows/3 {
				t.Fatalf("%d of %d flows went to the same backend on both nodes without Maglev", same, mgFlows)
			}
		}},
		// The table in the kernel is the one the control plane computed,
		// and the pick is its slot: a seed that differs between nodes
		// (a misconfigured cluster) breaks the agreement.
		{"another seed sends flows elsewhere", envOpts{maglevSize: 251, maglevSeed: 7}, func(t *testing.T, e *env) {
			node := e.node
			node.MaglevSeed = 8
			maps, err := OpenMaps("", WithMaglevTableSize(251))
			must(t, err)
			t.Cleanup(func() { maps.Close() })
			np, err := LoadNodePrograms(maps, node)
			must(t, err)
			t.Cleanup(func() { np.Close() })
			bs := backendsOf(n, 1)
			serveMaglev(t, e.maps, vipTCP, mgFlags, bs)
			serveMaglev(t, maps, vipTCP, mgFlags, bs)
			want, ok, err := e.maps.MaglevTable(revNATOf(vipTCP))
			if err != nil || !ok || !slices.Equal(want, loadbalancer.MaglevTable(bs, 251, mgSeed)) {
				t.Fatalf("table in the kernel (found %v, %v) is not the one written", ok, err)
			}
			a, b := e.picks(e.fromNetdev, vipTCP, 100, false), e.picks(np.FromNetdev, vipTCP, 100, false)
			if slices.Equal(a, b) {
				t.Fatal("flow hash seeds 7 and 8 pick alike for 100 flows")
			}
		}},
		// When one backend of n goes, about 1/n of the flows move: those
		// it had, and few others. Random picks move most of them.
		{"one backend going moves about 1/n of the flows", envOpts{maglevSize: 16381, maglevSeed: 7}, func(t *testing.T, e *env) {
			bs := backendsOf(n, 1)
			serveMaglev(t, e.maps, vipTCP, mgFlags, bs)
			before := e.picks(e.fromNetdev, vipTCP, mgFlows, false)
			serveMaglev(t, e.maps, vipTCP, mgFlags, slices.Delete(slices.Clone(bs), 3, 4))
			must(t, e.maps.DeleteBackend(4))
			// Forgotten, as on a node the flows never reached.
			if n, err := e.maps.FlushConntrack(nil); err != nil || n == 0 {
				t.Fatalf("flushed %d connections (%v)", n, err)
			}
			after := e.picks(e.fromNetdev, vipTCP, mgFlows, false)
			moved := 0
			for i := range before {
				if before[i] != after[i] {
					moved++
				}
			}
			frac := float64(moved) / float64(mgFlows)
			t.Logf("%.3f of %d flows moved when 1 of %d backends went (ideal %.3f)", frac, mgFlows, n, 1.0/n)
			if frac > 1.6/n {
				t.Fatalf("%.3f of the flows moved when 1 of %d backends went, want about %.3f", frac, n, 1.0/n)
			}
		}},
		// Under affinity the client's port is left out of the hash: all
		// of a client's connections go to one backend, on every node.
		{"affinity: all of a client's connections hash alike", envOpts{maglevSize: 251, maglevSeed: 7}, func(t *testing.T, e *env) {
			other := e.otherNode(251)
			serveMaglev(t, e.maps, vipTCP, mgFlags|spec.LBAffinity, backendsOf(n, 1))
			serveMaglev(t, other.maps, vipTCP, mgFlags|spec.LBAffinity, otherNodes(n))
			a, b := e.picks(e.fromNetdev, vipTCP, 20, true), e.picks(other.fromNetdev, vipTCP, 20, true)
			if len(share(a)) != 1 || !slices.Equal(a, b) {
				t.Fatalf("one client's connections went to %v on node 1 and %v on node 2", share(a), share(b))
			}
		}},
		// A frontend whose table is missing (not written yet) serves at
		// random rather than dropping.
		{"a missing table serves at random", envOpts{maglevSize: 251}, func(t *testing.T, e *env) {
			serveMaglev(t, e.maps, vipTCP, mgFlags, backendsOf(n, 1))
			must(t, e.maps.DeleteMaglev(revNATOf(vipTCP)))
			if s := share(e.picks(e.fromNetdev, vipTCP, 100, false)); len(s) < n/2 {
				t.Fatalf("100 flows reached %v", s)
			}
		}},
		// Local clients are balanced at random, as in Cilium: Maglev is
		// for flows that the network may send to any node.
		{"pods pick at random", envOpts{maglevSize: 251}, func(t *testing.T, e *env) {
			serveMaglev(t, e.maps, vipTCP, mgFlags, backendsOf(n, 1))
			seen := map[netip.Addr]bool{}
			for i := range 60 {
				seen[e.backendFor(uint16(30000+i), vipTCP)] = true
			}
			if len(seen) < 2 {
				t.Fatalf("60 connections of pod A went to %v", seen)
			}
		}},
	})
}
