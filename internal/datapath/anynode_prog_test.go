package datapath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// A NodePort answers at every node's address. A pod's connection to
// another node's address on a NodePort is translated where it starts, by
// the frontend at the unspecified address (spec.AnyNode), so that egress
// policy judges the backend, not remote-node; its replies come back from
// the address the pod called. An ExternalIP, a frontend on every node,
// is judged by its backend the same way.
func TestPrivilegedProgNodePortAtAnyNode(t *testing.T) {
	anyTCP := spec.Frontend{Address: spec.AnyNode, Port: 30080, Protocol: spec.ProtoTCP}
	anyUDP := spec.Frontend{Address: spec.AnyNode, Port: 30053, Protocol: spec.ProtoUDP}
	// What the pod sends: the remote node's address and the NodePort.
	atRemote := func(sport uint16, f spec.Frontend, flags string) pkt {
		return toFront(ipA, sport, spec.Frontend{Address: remoteIP, Port: f.Port, Protocol: f.Protocol}, flags)
	}
	runProgCases(t, []progCase{
		{"egress policy judges the backend, not the node", envOpts{policyEgress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(uint32(identity.RemoteNode), 0, 0, 0))
			e.serve(anyTCP, spec.LBNodePort, beC)
			ev := e.denied(e.fromContainer, atRemote(40000, anyTCP, "S"), spec.DropPolicy)
			if ev.Dst != ipC || ev.DstPort != 8080 || ev.DstIdentity != idC {
				t.Fatalf("drop event %+v, want the backend %v:8080 with identity %d", ev, ipC, idC)
			}
			e.setPolicy(epA, egress(uint32(identity.RemoteNode), 0, 0, 0), egress(idC, tcpProto, 8080, 0))
			if _, dst, _ := e.sends(e.fromContainer, atRemote(40001, anyTCP, "S"), actRedirect); dst != ap(ipC, 8080) {
				t.Fatalf("allowed SYN left for %v, want the backend %v", dst, ap(ipC, 8080))
			}
		}},
		// A hostNetwork backend is the node it runs on: egress policy
		// judges it as remote-node, whatever labels its pod has.
		{"a backend in another node's own network is judged as remote-node", envOpts{policyEgress: true}, func(t *testing.T, e *env) {
			hostBe := spec.Backend{ID: 99, Address: remoteIP, Port: 8080, Protocol: spec.ProtoTCP}
			e.setPolicy(epA, egress(idC, 0, 0, 0))
			e.serve(anyTCP, spec.LBNodePort, hostBe)
			ev := e.denied(e.fromContainer, atRemote(40000, anyTCP, "S"), spec.DropPolicy)
			if ev.Dst != remoteIP || ev.DstPort != 8080 || ev.DstIdentity != identity.RemoteNode {
				t.Fatalf("drop event %+v, want the node %v:8080 as remote-node", ev, remoteIP)
			}
			e.setPolicy(epA, egress(uint32(identity.RemoteNode), tcpProto, 8080, 0))
			if _, dst, _ := e.sends(e.fromContainer, atRemote(40001, anyTCP, "S"), actRedirect); dst != ap(remoteIP, 8080) {
				t.Fatalf("allowed SYN left for %v, want the node's %v", dst, ap(remoteIP, 8080))
			}
		}},
		{"tunnel mode too: the backend's node gets the translated packet", envOpts{mode: spec.Tunnel, policyEgress: true},
			func(t *testing.T, e *env) {
				e.setPolicy(epA, egress(uint32(identity.RemoteNode), 0, 0, 0))
				e.serve(anyTCP, spec.LBNodePort, beC)
				e.denied(e.fromContainer, atRemote(40000, anyTCP, "S"), spec.DropPolicy)
				e.setPolicy(epA, egress(uint32(identity.RemoteNode), 0, 0, 0), egress(idC, tcpProto, 8080, 0))
				if _, dst, _ := e.sends(e.fromContainer, atRemote(40001, anyTCP, "S"), actRedirect); dst != ap(ipC, 8080) {
					t.Fatalf("allowed SYN left for %v, want the backend %v", dst, ap(ipC, 8080))
				}
			}},
		{"an ExternalIP is judged by its backend too", envOpts{policyEgress: true}, func(t *testing.T, e *env) {
			// The ExternalIP is the world's address: allowing the world
			// does not allow the backend behind it.
			e.setPolicy(epA, egress(uint32(identity.World), 0, 0, 0))
			e.serve(extTCP, spec.LBExternalIP, beC)
			ev := e.denied(e.fromContainer, toFront(ipA, 40000, extTCP, "S"), spec.DropPolicy)
			if ev.Dst != ipC || ev.DstIdentity != idC {
				t.Fatalf("drop event %+v, want the backend %v with identity %d", ev, ipC, idC)
			}
		}},
		{"the reply comes from the node address called", envOpts{}, func(t *testing.T, e *env) {
			e.serve(anyTCP, spec.LBNodePort, beC)
			e.sends(e.fromContainer, atRemote(40000, anyTCP, "S"), actRedirect)
			src, dst, frame := e.sends(e.fromNetdev, tcp(ipC, ipA, 8080, 40000, "SA"), actRedirect)
			if src != ap(remoteIP, 30080) || dst != ap(ipA, 40000) || !bytes.Equal(frame[0:6], macA) {
				t.Fatalf("reply %v -> %v, want %v -> %v into A", src, dst, ap(remoteIP, 30080), ap(ipA, 40000))
			}
		}},
		{"an ICMP error from the backend quotes the node address called", envOpts{}, func(t *testing.T, e *env) {
			udpBe := udpBeC
			e.serve(anyUDP, spec.LBNodePort, udpBe)
			e.sends(e.fromContainer, atRemote(5000, anyUDP, ""), actRedirect)
			src, _, frame := e.sends(e.fromNetdev, unreachable(t, ipC, ipA, udp(ipA, ipC, 5000, 5353)), actRedirect)
			if qs, qd := quotedTuple(t, frame); src.Addr() != remoteIP || qs != ap(ipA, 5000) || qd != ap(remoteIP, 30053) {
				t.Fatalf("error from %v quoting %v -> %v, want from %v quoting %v", src.Addr(), qs, qd, remoteIP, ap(remoteIP, 30053))
			}
		}},
		{"a local backend's reply too", envOpts{}, func(t *testing.T, e *env) {
			e.serve(anyTCP, spec.LBNodePort, beB)
			e.sends(e.fromContainer, atRemote(40000, anyTCP, "S"), actRedirect)
			b := e.loadB(false)
			src, _, _ := e.sends(b.FromContainer, fromB(tcp(ipB, ipA, 8080, 40000, "SA")), actRedirect)
			if src != ap(remoteIP, 30080) {
				t.Fatalf("B's reply left from %v, want %v", src, ap(remoteIP, 30080))
			}
		}},
		{"hairpin: a pod reaching itself through another node's NodePort", envOpts{}, func(t *testing.T, e *env) {
			e.serve(anyTCP, spec.LBNodePort, beA)
			src, dst, _ := e.sends(e.fromContainer, atRemote(40000, anyTCP, "S"), actRedirect)
			if src != ap(HairpinIPv4, 40000) || dst != ap(ipA, 8080) {
				t.Fatalf("hairpin SYN %v -> %v", src, dst)
			}
			src, dst, _ = e.sends(e.fromContainer, tcp(ipA, HairpinIPv4, 8080, 40000, "SA"), actRedirect)
			if src != ap(remoteIP, 30080) || dst != ap(ipA, 40000) {
				t.Fatalf("hairpin reply %v -> %v, want %v -> %v", src, dst, ap(remoteIP, 30080), ap(ipA, 40000))
			}
		}},
		{"this node's address has a frontend of its own", envOpts{}, func(t *testing.T, e *env) {
			e.serve(anyTCP, spec.LBNodePort, beC)
			e.serve(spec.Frontend{Address: nodeIP, Port: 30080, Protocol: spec.ProtoTCP}, spec.LBNodePort, beD)
			if _, dst, _ := e.sends(e.fromContainer, toFront(ipA, 40000, spec.Frontend{Address: nodeIP, Port: 30080,
				Protocol: spec.ProtoTCP}, "S"), actRedirect); dst != ap(ipD, 8080) {
				t.Fatalf("SYN to this node's NodePort left for %v, want its own frontend's %v", dst, ap(ipD, 8080))
			}
		}},
		{"no backend: refused from the node address called", envOpts{}, func(t *testing.T, e *env) {
			e.serve(anyTCP, spec.LBNodePort)
			p := atRemote(40000, anyTCP, "S")
			e.refused(p, len(p.ipBytes(t)))
		}},
		{"only at nodes' addresses, only NodePorts, only in the NodePort range", envOpts{}, func(t *testing.T, e *env) {
			e.serve(anyTCP, spec.LBNodePort, beC)
			// The world, and a pod, at the NodePort: not translated.
			for _, dst := range []netip.Addr{ipWorld, ipD} {
				p := toFront(ipA, 40000, spec.Frontend{Address: dst, Port: 30080, Protocol: spec.ProtoTCP}, "S")
				if _, got, _ := e.sends(e.fromContainer, p, actRedirect); got != ap(dst, 30080) {
					t.Fatalf("SYN to %v left for %v, want it untranslated", ap(dst, 30080), got)
				}
			}
			// A frontend at the unspecified address that is no NodePort,
			// or a port outside the range: nothing.
			low := spec.Frontend{Address: spec.AnyNode, Port: 8000, Protocol: spec.ProtoTCP}
			e.serve(low, spec.LBNodePort, beC)
			if _, got, _ := e.sends(e.fromContainer, atRemote(40001, low, "S"), actRedirect); got != ap(remoteIP, 8000) {
				t.Fatalf("SYN to port 8000 left for %v, want it untranslated", got)
			}
			other := spec.Frontend{Address: spec.AnyNode, Port: 30081, Protocol: spec.ProtoTCP}
			must(t, e.maps.UpsertBackend(beC))
			must(t, e.maps.UpsertRevNAT(spec.RevNAT{Index: revNATOf(other), Address: other.Address, Port: other.Port}))
			if err := e.maps.UpsertService(spec.Service{Frontend: other, Backends: []spec.BackendID{beC.ID},
				RevNATIndex: revNATOf(other)}); err == nil {
				t.Fatal("a frontend at the unspecified address that is no NodePort was accepted")
			}
		}},
	})
}
