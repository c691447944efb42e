package datapath

import (
	"slices"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// points lists the trace points of the traces among evs.
func points(evs []spec.Event) []spec.TracePoint {
	var out []spec.TracePoint
	for _, ev := range evs {
		if ev.Type == spec.EventTrace {
			out = append(out, ev.Point)
		}
	}
	return out
}

func TestPrivilegedMonitorAggregation(t *testing.T) {
	// A's connection to the remote pod C: A's from-container sends, C's
	// answers come in through the node's from-netdev.
	out := func(flags string) pkt { return tcp(ipA, ipC, 40000, 80, flags) }
	back := func(flags string) pkt { return tcp(ipC, ipA, 80, 40000, flags) }
	runProgCases(t, []progCase{
		{"none traces every packet, where it arrives too", envOpts{mode: spec.Native, trace: true}, func(t *testing.T, e *env) {
			e.allowed(e.fromContainer, out("S"))
			e.allowed(e.fromNetdev, back("SA"))
			e.allowed(e.fromContainer, out("A"))
			e.allowed(e.fromNetdev, tcp(ipC, ipWorld, 5000, 80, "S"))
			e.allowed(e.fromNetdev, back("A"))
			evs := e.drain()
			// What comes in names its sender, whether it answers A or
			// goes on with what C opened.
			if evs[1].SrcIdentity != idC || evs[4].SrcIdentity != idC {
				t.Errorf("senders of C's packets into A: %d, %d, want %d", evs[1].SrcIdentity, evs[4].SrcIdentity, idC)
			}
			got := points(evs)
			want := []spec.TracePoint{spec.TraceToStack, spec.TraceToLXC, spec.TraceToStack, spec.TraceFromNetwork, spec.TraceToLXC}
			if !slices.Equal(got, want) {
				t.Fatalf("traces %v, want %v", got, want)
			}
		}},
		{"lowest leaves out where packets arrive", envOpts{mode: spec.Native, trace: true, aggregation: spec.AggregationLowest}, func(t *testing.T, e *env) {
			e.allowed(e.fromContainer, out("S"))
			e.allowed(e.fromContainer, out("A"))
			e.allowed(e.fromNetdev, tcp(ipC, ipWorld, 5000, 80, "S"))
			if got := points(e.drain()); len(got) != 2 || got[0] != spec.TraceToStack || got[1] != spec.TraceToStack {
				t.Fatalf("traces %v, want to-stack twice and no from-network", got)
			}
		}},
		{"medium reports a connection's news only", envOpts{mode: spec.Native, trace: true, aggregation: spec.AggregationMedium}, func(t *testing.T, e *env) {
			for _, step := range []struct {
				p     pkt
				in    bool
				trace bool
			}{
				{out("S"), false, true},   // a new connection
				{back("SA"), true, true},  // the first SYN the replies show
				{out("A"), false, false},  // ACK is not a reported flag
				{out("PA"), false, false}, // nor PSH
				{back("A"), true, false},  // nothing new either way
				{out("FA"), false, true},  // a FIN: the opener closes
				{out("FA"), false, false}, // seen already
				{back("FA"), true, true},  // the replies' first FIN
				{back("RA"), true, true},  // a RST is news too
				{out("S"), false, true},   // the tuple reopened: a new connection
			} {
				prog := e.fromContainer
				if step.in {
					prog = e.fromNetdev
				}
				e.allowed(prog, step.p)
				got := points(e.drain())
				if step.trace != (len(got) == 1) || len(got) > 1 {
					t.Fatalf("%v -> %v %q: traces %v, want a trace: %v", step.p.src, step.p.dst, step.p.flags, got, step.trace)
				}
			}
			// No conntrack says what is new about a packet that passes
			// to the stack: it is not traced.
			e.allowed(e.fromNetdev, tcp(ipC, ipWorld, 5000, 80, "S"))
			if got := points(e.drain()); len(got) != 0 {
				t.Fatalf("traces %v for a packet conntrack did not see", got)
			}
		}},
		// Proves the reports of a NodePort's connection to a remote
		// backend, which no conntrack entry of its own tracks: without
		// them medium traces none of its packets.
		{"medium reports a NodePort connection to a remote backend's news", envOpts{mode: spec.Native, trace: true,
			aggregation: spec.AggregationMedium}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			src, _, _ := e.sends(e.fromNetdev, clientSYN(npTCP, 40000), actRedirect)
			if got := e.drain(); len(got) != 1 || got[0].Point != spec.TraceToStack || got[0].Dst != ipC || got[0].RevNAT != revNATOf(npTCP) {
				t.Fatalf("the client's SYN: events %+v, want one trace towards the backend naming the service", got)
			}
			in := func(flags string) pkt { return outside(toFront(ipWorld, 40000, npTCP, flags)) }
			reply := func(flags string) pkt { return tcp(ipC, nodeIP, 8080, src.Port(), flags) }
			for _, step := range []struct {
				p     pkt
				trace bool
			}{
				{reply("SA"), true}, // the replies' first SYN
				{in("A"), false},
				{reply("A"), false},
				{in("FA"), true}, // the client closes
				{in("FA"), false},
				{reply("FA"), true},
			} {
				e.expect(e.fromNetdev, step.p.frame(t), actRedirect)
				got := points(e.drain())
				if step.trace != (len(got) == 1) || len(got) > 1 {
					t.Fatalf("%v -> %v %q: traces %v, want a trace: %v", step.p.src, step.p.dst, step.p.flags, got, step.trace)
				}
			}
		}},
		{"medium reports a quiet connection again after the interval", envOpts{mode: spec.Native, trace: true,
			aggregation: spec.AggregationMedium, reportEvery: time.Second}, func(t *testing.T, e *env) {
			e.allowed(e.fromContainer, out("S"))
			e.allowed(e.fromNetdev, back("SA"))
			e.drain()
			// Past two whole seconds: the datapath counts seconds.
			time.Sleep(2100 * time.Millisecond)
			e.allowed(e.fromContainer, out("A"))
			e.allowed(e.fromContainer, out("A"))
			if got := points(e.drain()); len(got) != 1 {
				t.Fatalf("traces %v, want the first ACK's after the interval and not the second's", got)
			}
		}},
	})
}
