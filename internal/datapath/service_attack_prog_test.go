package datapath

import (
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// The service path plays no part in a pod's attempts to spoof, to reach
// what the service does not expose, or to have a forged reply dressed up
// as the frontend's.
func TestPrivilegedProgServiceAttacks(t *testing.T) {
	runProgCases(t, []progCase{
		// Anti-spoofing runs first: no service entry, no affinity, and
		// the drop names the packet as sent.
		{"a spoofed source to a frontend is dropped before translation", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, spec.LBAffinity, beC)
			ev := e.denied(e.fromContainer, toFront(ipB, 40000, tcpFront, "S"), spec.DropInvalidSource)
			if ev.Dst != svcIP || ev.DstPort != 80 {
				t.Fatalf("drop event %+v, want the untranslated packet", ev)
			}
			if _, ok := e.serviceEntry(ipB, 40000, tcpFront); ok {
				t.Fatal("the spoofed packet made a service entry")
			}
			var k lxcLbAffinityKey
			var v lxcLbAffinityValue
			if e.maps.LBAffinity.Iterate().Next(&k, &v) {
				t.Fatalf("the spoofed packet made an affinity entry for %x", k.Client)
			}
		}},
		{"no pod may send from the hairpin address", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beA)
			e.denied(e.fromContainer, tcp(HairpinIPv4, svcIP, 40000, 80, "S"), spec.DropInvalidSource)
			e.denied(e.fromContainer, tcp(HairpinIPv4, ipA, 40000, 8080, "S"), spec.DropInvalidSource)
			e.denied(e.fromContainer, udp(HairpinIPv4, ipB, 40000, 8080), spec.DropInvalidSource)
		}},
		// The service translates its own port only, to its target port;
		// every other destination is judged as what it is.
		{"a backend port the service does not expose stays closed", envOpts{policyEgress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 8080, 0))
			e.serve(tcpFront, 0, beC)
			e.allowed(e.fromContainer, toFront(ipA, 40000, tcpFront, "S"))
			// Other ports of the frontend are not translated: their
			// destination is the ClusterIP, which policy does not allow.
			ev := e.denied(e.fromContainer, tcp(ipA, svcIP, 40000, 22, "S"), spec.DropPolicy)
			if ev.Dst != svcIP || ev.DstPort != 22 {
				t.Fatalf("drop event %+v, want the untranslated frontend port", ev)
			}
			e.denied(e.fromContainer, udp(ipA, svcIP, 40000, 80), spec.DropPolicy)
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 22, "S"), spec.DropPolicy)
		}},
		// Reverse translation needs a tracked connection with a reverse
		// NAT index: nothing else is made to look like the frontend's.
		{"a forged reply from the network is not translated", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeC)
			e.serve(tcpFront, 0, beC)
			e.backendFor(5000, udpFront)
			e.denied(e.fromNetdev, tcp(ipC, ipA, 8080, 40000, "SA"), spec.DropUnknownCT)
			for _, p := range []pkt{
				udp(ipC, ipA, 5353, 5001), // no such connection
				udp(ipC, ipA, 5354, 5000), // another port of the backend
				udp(ipD, ipA, 5353, 5000), // another pod
			} {
				if src, _, _ := e.sends(e.fromNetdev, p, actRedirect); src != ap(p.src, p.sport) {
					t.Fatalf("%v:%d -> %v:%d arrived from %v", p.src, p.sport, p.dst, p.dport, src)
				}
			}
		}},
		{"a pod cannot forge a backend's reply", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeA)
			e.serve(tcpFront, 0, beA)
			e.denied(e.fromContainer, tcp(ipA, ipB, 8080, 40000, "SA"), spec.DropUnknownCT)
			if src, _, _ := e.sends(e.fromContainer, udp(ipA, ipB, 5353, 5000), actRedirect); src != ap(ipA, 5353) {
				t.Fatalf("A's datagram to B left from %v", src)
			}
			// Nor a hairpin reply: nothing was sent to A through the
			// service, so the hairpin address is just the world.
			if src, dst, _ := e.sends(e.fromContainer, udp(ipA, HairpinIPv4, 5353, 5000), actOK); src != ap(ipA, 5353) ||
				dst != ap(HairpinIPv4, 5000) {
				t.Fatalf("A's datagram to the hairpin address left as %v -> %v", src, dst)
			}
		}},
		// An ICMP error is related only between a connection's two ends;
		// a third party's is judged by policy, and even when let in it
		// keeps its own source.
		{"a third party's ICMP error is no backend's", envOpts{policyIngress: true}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeC)
			e.backendFor(5000, udpFront)
			forged := unreachable(t, ipD, ipA, udp(ipA, ipC, 5000, 5353))
			e.denied(e.fromNetdev, forged, spec.DropPolicy)
			e.setPolicy(epA, ingressRule(idD, 1, 0, 0))
			src, _, frame := e.sends(e.fromNetdev, forged, actRedirect)
			if _, qd := quotedTuple(t, frame); src.Addr() != ipD || qd != ap(svcIP, 53) {
				t.Fatalf("error from %v quoting %v, want D's own, quoting the frontend A knows", src.Addr(), qd)
			}
		}},
		{"an ICMP error quoting no connection is not translated", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeC)
			e.backendFor(5000, udpFront)
			stray := unreachable(t, ipC, ipA, udp(ipA, ipC, 5001, 5353))
			src, _, frame := e.sends(e.fromNetdev, stray, actRedirect)
			if _, qd := quotedTuple(t, frame); src.Addr() != ipC || qd != ap(ipC, 5353) {
				t.Fatalf("error from %v quoting %v, want it untouched", src.Addr(), qd)
			}
		}},
	})
}
