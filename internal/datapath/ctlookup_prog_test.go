package datapath

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Conntrack looks up the key of the direction a packet probably has
// first (see ct_reply_likely); these cases pin that the answer never
// depends on the guess.
func TestPrivilegedProgConntrackLookupOrder(t *testing.T) {
	type step struct {
		prog func(e *env) *ebpf.Program
		p    pkt
		want spec.CTStatus
	}
	out := func(e *env) *ebpf.Program { return e.fromContainer }
	in := func(e *env) *ebpf.Program { return e.fromNetdev }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"client on a high port", []step{
			{out, tcp(ipA, ipC, 40000, 80, "S"), spec.CTNew},
			{in, tcp(ipC, ipA, 80, 40000, "SA"), spec.CTReply},
			{out, tcp(ipA, ipC, 40000, 80, "A"), spec.CTEstablished},
			{in, tcp(ipC, ipA, 80, 40000, "A"), spec.CTReply},
		}},
		{"client on a port below the server's", []step{
			{out, tcp(ipA, ipC, 1000, 8080, "S"), spec.CTNew},
			{in, tcp(ipC, ipA, 8080, 1000, "SA"), spec.CTReply},
			{out, tcp(ipA, ipC, 1000, 8080, "A"), spec.CTEstablished},
			{in, tcp(ipC, ipA, 8080, 1000, "A"), spec.CTReply},
		}},
		{"connection from the network to a pod", []step{
			{in, tcp(ipC, ipA, 40000, 80, "S"), spec.CTNew},
			{out, tcp(ipA, ipC, 80, 40000, "SA"), spec.CTReply},
			{in, tcp(ipC, ipA, 40000, 80, "A"), spec.CTEstablished},
		}},
		{"UDP with equal ports", []step{
			{out, udp(ipA, ipC, 5000, 5000), spec.CTNew},
			{in, udp(ipC, ipA, 5000, 5000), spec.CTReply},
			{out, udp(ipA, ipC, 5000, 5000), spec.CTEstablished},
		}},
		{"echo", []step{
			{out, echo(ipA, ipC, 9, false), spec.CTNew},
			{in, echo(ipC, ipA, 9, true), spec.CTReply},
			{out, echo(ipA, ipC, 9, false), spec.CTEstablished},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{mode: spec.Native, trace: true})
			for i, s := range tc.steps {
				e.allowed(s.prog(e), s.p)
				evs := e.drain()
				if len(evs) != 1 || evs[0].CT != s.want {
					t.Fatalf("step %d %v:%d -> %v:%d: events %+v, want one trace with %v",
						i, s.p.src, s.p.sport, s.p.dst, s.p.dport, evs, s.want)
				}
			}
		})
	}
}

// A connection remembers which of its sides has no local endpoint, so that
// a pod's packets towards that side skip the endpoint lookup.
func TestPrivilegedProgConntrackRemembersLocalSides(t *testing.T) {
	runProgCases(t, []progCase{
		{"flags by who created the entry", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			for _, c := range []struct {
				prog func(e *env) *ebpf.Program
				p    pkt
				want uint16
			}{
				{func(e *env) *ebpf.Program { return e.fromContainer }, tcp(ipA, ipC, 40000, 80, "S"), ctFlagNoDstEP},
				{func(e *env) *ebpf.Program { return e.fromContainer }, tcp(ipA, ipB, 40000, 80, "S"), 0},
				{func(e *env) *ebpf.Program { return e.fromContainer }, udp(ipA, ipWorld, 5000, 53), ctFlagNoDstEP},
				{func(e *env) *ebpf.Program { return e.fromNetdev }, tcp(ipC, ipA, 40001, 80, "S"), ctFlagNoSrcEP},
				{func(e *env) *ebpf.Program { return e.toContainer }, tcp(nodeIP, ipA, 40002, 80, "S"), 0},
			} {
				e.allowed(c.prog(e), c.p)
				v, ok := e.ctEntry(c.p)
				if !ok {
					t.Fatalf("%v -> %v: no entry", c.p.src, c.p.dst)
				}
				if got := v.Flags & (ctFlagNoSrcEP | ctFlagNoDstEP); got != c.want {
					t.Fatalf("%v -> %v: flags %#x, want %#x", c.p.src, c.p.dst, got, c.want)
				}
			}
		}},
		{"a pod's reply to a remote client is routed", envOpts{mode: spec.Native, trace: true}, func(t *testing.T, e *env) {
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "S"))
			e.drain()
			e.expect(e.fromContainer, tcp(ipA, ipC, 80, 40000, "SA").frame(t), actRedirect)
			evs := e.drain()
			if len(evs) != 1 || evs[0].Point != spec.TraceToStack || evs[0].DstIdentity != idC || evs[0].CT != spec.CTReply {
				t.Fatalf("events %+v, want one reply traced to the stack from identity %d", evs, idC)
			}
		}},
		{"an established flow to a remote side does not ask the endpoint map", envOpts{mode: spec.Native, trace: true}, func(t *testing.T, e *env) {
			p := tcp(ipA, ipC, 40000, 80, "S")
			e.allowed(e.fromContainer, p)
			// Were the endpoint map asked, C would now be a local peer.
			must(t, e.maps.UpsertEndpoint(EndpointEntry{ID: 9, Identity: idC, IPv4: ipC, MAC: macB, HostMAC: hostMacB, HostIfindex: 1}))
			e.drain()
			p.flags = "A"
			e.allowed(e.fromContainer, p)
			if evs := e.drain(); len(evs) != 1 || evs[0].Point != spec.TraceToStack || evs[0].DstEndpoint != 0 {
				t.Fatalf("events %+v, want one trace to the stack", evs)
			}
			// A new connection does ask.
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40001, 80, "S"))
			if evs := e.drain(); len(evs) != 1 || evs[0].Point != spec.TraceToLXC || evs[0].DstEndpoint != 9 {
				t.Fatalf("events %+v, want one trace to the new local endpoint", evs)
			}
		}},
	})
}
