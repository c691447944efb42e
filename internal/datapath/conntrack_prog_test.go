package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

func (e *env) ctEntry(p pkt) (CTEntry, bool) {
	e.t.Helper()
	k := CTKey{Saddr: be32(p.src), Daddr: be32(p.dst), Sport: htons(p.sport), Dport: htons(p.dport), Protocol: uint8(p.proto)}
	var v CTEntry
	if err := e.maps.CT4.Lookup(&k, &v); err != nil {
		return v, false
	}
	return v, true
}

// track puts p's connection into conntrack, as another endpoint's
// programs would have.
func (e *env) track(p pkt, src, dst uint32) {
	e.t.Helper()
	now, err := Monotonic()
	must(e.t, err)
	k := CTKey{Saddr: be32(p.src), Daddr: be32(p.dst), Sport: htons(p.sport), Dport: htons(p.dport), Protocol: uint8(p.proto)}
	must(e.t, e.maps.CT4.Put(&k, &CTEntry{Expires: uint64(now + time.Hour), SrcIdentity: src, DstIdentity: dst}))
}

func (e *env) lifetime(p pkt) time.Duration {
	e.t.Helper()
	v, ok := e.ctEntry(p)
	if !ok {
		e.t.Fatalf("no conntrack entry for %+v", p)
	}
	now, err := Monotonic()
	must(e.t, err)
	return time.Duration(v.Expires) - now
}

func TestPrivilegedProgConntrack(t *testing.T) {
	both := envOpts{policyEgress: true, policyIngress: true, mode: spec.Tunnel}
	runProgCases(t, []progCase{
		{"replies pass without an ingress rule", both, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
			e.denied(e.fromNetdev, tcp(ipC, ipA, 80, 22, "S"), spec.DropPolicy)
		}},
		{"established flows the new policy allows survive a policy change", both, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0), egress(idD, udpProto, 53, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"))
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "A"))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40001, 81, "S"), spec.DropPolicy)
		}},
		{"removing an egress allow stops its TCP and UDP flows", both, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0), egress(idC, udpProto, 53, 0), egress(idD, tcpProto, 443, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
			e.allowed(e.fromContainer, udp(ipA, ipC, 5000, 53))
			e.allowed(e.fromNetdev, udp(ipC, ipA, 53, 5000))
			e.allowed(e.fromContainer, tcp(ipA, ipD, 40001, 443, "S"))
			e.setPolicy(epA, egress(idD, tcpProto, 443, 0))
			// The next packets of the flows policy no longer allows drop,
			// from either end; the one it still allows goes on.
			e.denied(e.fromContainer, udp(ipA, ipC, 5000, 53), spec.DropPolicy)
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"), spec.DropUnknownCT)
			e.denied(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "A"), spec.DropUnknownCT)
			e.allowed(e.fromContainer, tcp(ipA, ipD, 40001, 443, "A"))
			if _, ok := e.ctEntry(tcp(ipA, ipD, 40001, 443, "")); !ok {
				t.Fatal("the allowed connection lost its conntrack entry")
			}
		}},
		{"removing an ingress allow stops its TCP and UDP flows", both, func(t *testing.T, e *env) {
			e.setPolicy(epA, ingressRule(idC, tcpProto, 80, 0), ingressRule(idC, udpProto, 53, 0))
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "S"))
			e.allowed(e.fromNetdev, udp(ipC, ipA, 5000, 53))
			e.allowed(e.fromContainer, udp(ipA, ipC, 53, 5000))
			e.setPolicy(epA, ingressRule(idD, tcpProto, 80, 0))
			e.denied(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "A"), spec.DropUnknownCT)
			e.denied(e.fromNetdev, udp(ipC, ipA, 5000, 53), spec.DropPolicy)
			// The server's answer is no reply any more either: egress is
			// default deny too.
			e.denied(e.fromContainer, udp(ipA, ipC, 53, 5000), spec.DropPolicy)
		}},
		{"a TCP segment of no tracked connection is dropped", envOpts{mode: spec.Tunnel}, func(t *testing.T, e *env) {
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"), spec.DropUnknownCT)
			e.denied(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"), spec.DropUnknownCT)
			e.denied(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "R"), spec.DropUnknownCT)
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 40001, 80, "S"))
		}},
		{"related ICMP errors pass, unrelated ones do not", both, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, udpProto, 53, 0))
			sent := udp(ipA, ipC, 5000, 53)
			e.allowed(e.fromContainer, sent)
			e.allowed(e.fromNetdev, unreachable(t, ipC, ipA, sent))
			other := udp(ipA, ipC, 5001, 53)
			e.denied(e.fromNetdev, unreachable(t, ipC, ipA, other), spec.DropPolicy)
		}},
		{"an ICMP error from a router on the path is not related", both, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, udpProto, 53, 0), ingressRule(uint32(identity.RemoteNode), icmpProto, 11, 0))
			sent := udp(ipA, ipC, 5000, 53)
			e.allowed(e.fromContainer, sent)
			// Port unreachable from the router: ICMP type 3 is not allowed.
			e.denied(e.fromNetdev, unreachable(t, remoteIP, ipA, sent), spec.DropPolicy)
			// Time exceeded (11) is, by policy alone.
			exceeded := unreachable(t, remoteIP, ipA, sent)
			exceeded.icmpType, exceeded.icmpCode = 11, 0
			e.allowed(e.fromNetdev, exceeded)
		}},
		{"time exceeded from the peer for an echo request is related", both, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, icmpProto, 0, 0))
			sent := echo(ipA, ipC, 5, false)
			e.allowed(e.fromContainer, sent)
			exceeded := unreachable(t, ipC, ipA, sent)
			exceeded.icmpType, exceeded.icmpCode = 11, 0
			e.allowed(e.fromNetdev, exceeded)
			other := unreachable(t, ipC, ipA, echo(ipA, ipC, 6, false))
			other.icmpType, other.icmpCode = 11, 0
			e.denied(e.fromNetdev, other, spec.DropPolicy)
		}},
		{"a pod cannot send ICMP errors quoting its flow to anyone else", both, func(t *testing.T, e *env) {
			// A serves C on UDP 53; B has a flow with D. Egress is default deny.
			e.setPolicy(epA, ingressRule(idC, udpProto, 53, 0))
			query := udp(ipC, ipA, 5000, 53)
			e.allowed(e.fromNetdev, query)
			e.track(udp(ipD, ipB, 6000, 53), idD, idB)
			// The answer to its own flow goes back to its peer.
			e.allowed(e.fromContainer, unreachable(t, ipA, ipC, query))
			// The same quote towards the world or another pod carries a
			// payload past egress policy.
			e.denied(e.fromContainer, unreachable(t, ipA, ipWorld, query), spec.DropPolicy)
			e.denied(e.fromContainer, unreachable(t, ipA, ipD, query), spec.DropPolicy)
			// Quoting B's flow, towards B's peer.
			e.denied(e.fromContainer, unreachable(t, ipA, ipD, udp(ipD, ipB, 6000, 53)), spec.DropPolicy)
		}},
		{"an ICMP error for another pod's flow does not enter a pod", envOpts{policyIngress: true, mode: spec.Tunnel}, func(t *testing.T, e *env) {
			// B has a flow with C, and so has A; ingress into A is default deny.
			sentB := udp(ipB, ipC, 7000, 53)
			e.track(udp(ipC, ipB, 53, 7000), idC, idB)
			sentA := udp(ipA, ipC, 5000, 53)
			e.allowed(e.fromContainer, sentA)
			e.allowed(e.fromNetdev, unreachable(t, ipC, ipA, sentA))
			// Quoting B's flow (either direction), addressed to A.
			e.denied(e.fromNetdev, unreachable(t, ipC, ipA, sentB), spec.DropPolicy)
			e.denied(e.fromNetdev, unreachable(t, ipC, ipA, udp(ipC, ipB, 53, 7000)), spec.DropPolicy)
			// Quoting A's flow, from somebody who is not its peer.
			e.denied(e.fromNetdev, unreachable(t, ipD, ipA, sentA), spec.DropPolicy)
			e.denied(e.fromNetdev, unreachable(t, ipWorld, ipA, sentA), spec.DropPolicy)
		}},
		{"echo replies follow their request", both, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, icmpProto, 0, 0))
			e.allowed(e.fromContainer, echo(ipA, ipC, 7, false))
			e.allowed(e.fromNetdev, echo(ipC, ipA, 7, true))
			e.denied(e.fromNetdev, echo(ipC, ipA, 8, true), spec.DropPolicy)
		}},
		{"TCP lifetimes: SYN short, established long, closing shortest", envOpts{mode: spec.Tunnel}, func(t *testing.T, e *env) {
			syn := tcp(ipA, ipC, 40000, 80, "S")
			e.allowed(e.fromContainer, syn)
			if l := e.lifetime(syn); l > 60*time.Second || l < 50*time.Second {
				t.Fatalf("SYN lifetime %v, want about 60s", l)
			}
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
			if l := e.lifetime(syn); l < time.Hour {
				t.Fatalf("established lifetime %v, want hours", l)
			}
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "R"))
			if l := e.lifetime(syn); l > 10*time.Second {
				t.Fatalf("closing lifetime %v, want at most 10s", l)
			}
		}},
		{"UDP entries count packets and bytes", envOpts{mode: spec.Tunnel}, func(t *testing.T, e *env) {
			p := udp(ipA, ipC, 5000, 53)
			e.allowed(e.fromContainer, p)
			e.allowed(e.fromContainer, p)
			e.allowed(e.fromNetdev, udp(ipC, ipA, 53, 5000))
			v, _ := e.ctEntry(p)
			if v.Packets != 3 || v.Bytes == 0 || v.SrcIdentity != idA || v.Flags&1 == 0 {
				t.Fatalf("entry %+v, want 3 packets from identity %d with a reply seen", v, idA)
			}
		}},
		{"an expired entry is no reply", both, func(t *testing.T, e *env) {
			k := CTKey{Saddr: be32(ipA), Daddr: be32(ipC), Sport: htons(40000), Dport: htons(80), Protocol: tcpProto}
			must(t, e.maps.CT4.Put(&k, &CTEntry{Expires: 1}))
			e.denied(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"), spec.DropUnknownCT)
		}},
		{"garbage collection removes expired entries only", envOpts{mode: spec.Tunnel}, func(t *testing.T, e *env) {
			live := udp(ipA, ipC, 5000, 53)
			e.allowed(e.fromContainer, live)
			k := CTKey{Saddr: be32(ipA), Daddr: be32(ipD), Sport: htons(1), Dport: htons(2), Protocol: udpProto}
			must(t, e.maps.CT4.Put(&k, &CTEntry{Expires: 1}))
			now, err := Monotonic()
			must(t, err)
			n, err := e.maps.CollectConntrack(now)
			must(t, err)
			if _, ok := e.ctEntry(live); n != 1 || !ok {
				t.Fatalf("collected %d (want 1); live entry kept: %v", n, ok)
			}
		}},
		{"garbage collection keeps an expired tuple a new connection took meanwhile", envOpts{mode: spec.Tunnel}, func(t *testing.T, e *env) {
			// The walk found the old connection's entry expired; before
			// its delete, a client's port came round and the same tuple
			// started a new connection.
			syn := tcp(ipA, ipC, 40000, 80, "S")
			k := CTKey{Saddr: be32(ipA), Daddr: be32(ipC), Sport: htons(40000), Dport: htons(80), Protocol: tcpProto}
			must(t, e.maps.CT4.Put(&k, &CTEntry{Expires: 1}))
			now, err := Monotonic()
			must(t, err)
			e.allowed(e.fromContainer, syn)
			n, err := e.maps.deleteExpired([]CTKey{k}, now)
			must(t, err)
			if _, ok := e.ctEntry(syn); n != 0 || !ok {
				t.Fatalf("deleted %d; the new connection's entry kept: %v", n, ok)
			}
			// Its answer still finds it.
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
		}},
	})
}

func TestPrivilegedProgFragments(t *testing.T) {
	enforce := envOpts{policyEgress: true, mode: spec.Tunnel}
	first := func(dport uint16, id uint16) pkt {
		p := udp(ipA, ipC, 5000, dport)
		p.ipID, p.moreFrags = id, true
		return p
	}
	later := func(id uint16) pkt {
		p := udp(ipA, ipC, 0, 0)
		p.ipID, p.fragOffset = id, 4
		return p
	}
	runProgCases(t, []progCase{
		{"later fragments follow an allowed first one", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, udpProto, 53, 0))
			e.allowed(e.fromContainer, first(53, 99))
			e.allowed(e.fromContainer, later(99))
		}},
		{"a later fragment without its first is dropped", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, 0, 0, 0))
			e.denied(e.fromContainer, later(100), spec.DropFragNotFound)
		}},
		{"later fragments of a denied port stay denied", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, udpProto, 53, 0))
			e.denied(e.fromContainer, first(54, 101), spec.DropPolicy)
			e.denied(e.fromContainer, later(101), spec.DropPolicy)
		}},
		{"fragments arriving from the network are judged too", envOpts{policyIngress: true}, func(t *testing.T, e *env) {
			p := udp(ipC, ipA, 0, 0)
			p.ipID, p.fragOffset = 102, 4
			e.denied(e.fromNetdev, p, spec.DropFragNotFound)
		}},
	})
}

func TestPrivilegedProgEvents(t *testing.T) {
	runProgCases(t, []progCase{
		{"a drop event carries tuple, identities and direction", envOpts{policyEgress: true}, func(t *testing.T, e *env) {
			ev := e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), spec.DropPolicy)
			want := spec.Event{Type: spec.EventDrop, Reason: spec.DropPolicy, Direction: spec.Egress, Src: ipA, Dst: ipC,
				SrcPort: 40000, DstPort: 80, Protocol: tcpProto, TCPFlags: 0x02, SrcIdentity: idA,
				DstIdentity: idC, SrcEndpoint: epA, Length: ev.Length, Monotonic: ev.Monotonic, Ifindex: ev.Ifindex}
			if ev != want || ev.Length == 0 || ev.Monotonic == 0 {
				t.Fatalf("event\n%+v, want\n%+v", ev, want)
			}
		}},
		{"policy verdicts only for new connections", envOpts{policyEgress: true, mode: spec.Tunnel}, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			evs := e.drain()
			if len(evs) != 1 || evs[0].Type != spec.EventPolicyVerdict || evs[0].Verdict != spec.VerdictAllow || evs[0].Direction != spec.Egress {
				t.Fatalf("events %+v, want one allow verdict", evs)
			}
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"))
			if evs := e.drain(); len(evs) != 0 {
				t.Fatalf("events %+v for an established flow, want none", evs)
			}
		}},
		{"a denied verdict names the reason", envOpts{policyEgress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, denyRule(egress(idC, 0, 0, 0)))
			e.run(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S").frame(t))
			evs := e.drain()
			if len(evs) != 2 || evs[0].Verdict != spec.VerdictDeny || evs[0].Reason != spec.DropPolicyDeny || evs[1].Type != spec.EventDrop {
				t.Fatalf("events %+v, want a deny verdict then a drop", evs)
			}
		}},
		{"traces only when enabled", envOpts{}, func(t *testing.T, e *env) {
			e.allowed(e.fromContainer, tcp(ipA, ipB, 40000, 80, "S"))
			if evs := e.drain(); len(evs) != 0 {
				t.Fatalf("events %+v with tracing off", evs)
			}
		}},
		{"trace points name where a packet went", envOpts{trace: true}, func(t *testing.T, e *env) {
			e.allowed(e.fromContainer, tcp(ipA, ipB, 40000, 80, "S"))
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "S"))
			evs := e.drain()
			if len(evs) != 2 || evs[0].Point != spec.TraceToLXC || evs[0].DstEndpoint != epB ||
				evs[1].Point != spec.TraceToLXC || evs[1].DstEndpoint != epA || evs[1].CT != spec.CTNew {
				t.Fatalf("events %+v", evs)
			}
		}},
		{"counters by reason and direction", envOpts{policyEgress: true, mode: spec.Tunnel}, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			p := tcp(ipA, ipC, 40000, 80, "S")
			e.allowed(e.fromContainer, p)
			e.allowed(e.fromContainer, p)
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 81, "S"), spec.DropPolicy)
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
			size := uint64(len(p.frame(t)))
			if c := e.counter(spec.Forwarded, spec.Egress); c.Packets != 2 || c.Bytes != 2*size {
				t.Fatalf("forwarded egress %+v, want 2 packets of %d bytes", c, size)
			}
			if c := e.counter(spec.DropPolicy, spec.Egress); c.Packets != 1 {
				t.Fatalf("policy drops %+v, want 1", c)
			}
			if c := e.counter(spec.Forwarded, spec.Ingress); c.Packets != 1 {
				t.Fatalf("forwarded ingress %+v, want 1", c)
			}
			// Untouched slots of the metrics array are not reported.
			if cs, err := e.maps.Counters(); err != nil || len(cs) != 3 {
				t.Fatalf("counters %+v (%v), want the 3 that counted", cs, err)
			}
		}},
	})
}

func TestPrivilegedProgDumps(t *testing.T) {
	runProgCases(t, []progCase{
		{"maps read back as typed values", envOpts{mode: spec.Tunnel, masquerade: true}, func(t *testing.T, e *env) {
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.allowed(e.fromContainer, tcp(ipA, ipWorld, 40001, 443, "S"))
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
			conns, err := e.maps.Connections()
			must(t, err)
			want := map[Connection]bool{}
			for _, c := range conns {
				c.Expires, c.Bytes = 0, 0
				want[c] = true
			}
			toC := Connection{Src: ipA, Dst: ipC, SrcPort: 40000, DstPort: 80, Protocol: tcpProto, Packets: 2,
				SrcIdentity: idA, DstIdentity: idC, Tunnel: remoteIP, SeenReply: true}
			toWorld := Connection{Src: ipA, Dst: ipWorld, SrcPort: 40001, DstPort: 443, Protocol: tcpProto, Packets: 1,
				SrcIdentity: idA, DstIdentity: identity.World, Masqueraded: true}
			if len(conns) != 2 || !want[toC] || !want[toWorld] {
				t.Fatalf("connections %+v", conns)
			}
			eps, err := e.maps.EndpointEntries()
			must(t, err)
			if len(eps) != 2 {
				t.Fatalf("endpoints %+v", eps)
			}
			ipc, err := e.maps.IPCacheEntries()
			must(t, err)
			if got := ipc[netip.MustParsePrefix("10.2.0.30/32")]; got != (spec.IPCacheEntry{Identity: idC, TunnelEndpoint: remoteIP}) {
				t.Fatalf("ipcache entry %+v", got)
			}
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			if st, err := e.maps.PolicyState(epA); err != nil || len(st) != 1 {
				t.Fatalf("policy state %+v, %v", st, err)
			}
		}},
	})
}

// A full conntrack table evicts its least recently used entries: new
// connections are still tracked, and the map says it is full.
func TestPrivilegedProgConntrackFull(t *testing.T) {
	runProgCases(t, []progCase{
		{"new connections get in", envOpts{policyEgress: true, mode: spec.Tunnel}, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			now, err := Monotonic()
			must(t, err)
			size := int(e.maps.CT4.MaxEntries())
			for i := range size {
				k := CTKey{Saddr: be32(ipB), Daddr: be32(ipD), Sport: htons(uint16(i)), Dport: htons(uint16(i >> 16)), Protocol: udpProto}
				must(t, e.maps.CT4.Put(&k, &CTEntry{Expires: uint64(now + time.Hour)}))
			}
			sums, err := e.maps.Summaries()
			must(t, err)
			for _, s := range sums {
				if s.Name == "cilium_ct4" && s.Entries < size*9/10 {
					t.Fatalf("conntrack holds %d of %d after filling it", s.Entries, size)
				}
			}
			syn := tcp(ipA, ipC, 40000, 80, "S")
			e.allowed(e.fromContainer, syn)
			if _, ok := e.ctEntry(syn); !ok {
				t.Fatal("no conntrack entry for a new connection in a full table")
			}
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"))
		}},
	})
}
