package datapath

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// North-south services: a client in the world (ipWorld, behind the next
// hop) reaches frontends at the node's address, or at an ExternalIP
// routed to the node, through from-netdev.
var (
	npTCP     = spec.Frontend{Address: nodeIP, Port: 30080, Protocol: spec.ProtoTCP}
	npUDP     = spec.Frontend{Address: nodeIP, Port: 30053, Protocol: spec.ProtoUDP}
	extIP     = netip.MustParseAddr("203.0.113.10")
	extTCP    = spec.Frontend{Address: extIP, Port: 80, Protocol: spec.ProtoTCP}
	hostPort  = spec.Frontend{Address: nodeIP, Port: 8081, Protocol: spec.ProtoTCP}
	uplinkMAC = net.HardwareAddr{2, 0, 0, 0, 0, 1}
)

// outside dresses p as the next hop delivers it to the uplink.
func outside(p pkt) pkt {
	p.srcMAC, p.dstMAC = macNext, uplinkMAC
	return p
}

// clientSYN is the world's first packet to f.
func clientSYN(f spec.Frontend, sport uint16) pkt {
	return outside(toFront(ipWorld, sport, f, "S"))
}

// toClient checks that a frame leaves for the client from the frontend,
// routed to the next hop, with valid checksums.
func toClient(t testing.TB, frame []byte, f spec.Frontend, sport uint16) {
	t.Helper()
	src, dst := tuple(t, frame)
	if src != ap(f.Address, f.Port) || dst != ap(ipWorld, sport) || !bytes.Equal(frame[0:6], macNext) {
		t.Fatalf("left as %v -> %v to MAC %x, want %v -> %v to %x", src, dst, frame[0:6],
			ap(f.Address, f.Port), ap(ipWorld, sport), macNext)
	}
}

// forwardedRemote sends the world's SYN to f, wants it sent on to the
// remote backend be from the node's address, and returns the node's port.
func (e *env) forwardedRemote(f spec.Frontend, be spec.Backend, sport uint16, want uint32) uint16 {
	e.t.Helper()
	src, dst, frame := e.sends(e.fromNetdev, clientSYN(f, sport), want)
	if src.Addr() != nodeIP || dst != ap(be.Address, be.Port) {
		e.t.Fatalf("sent on as %v -> %v, want %v -> %v", src, dst, nodeIP, ap(be.Address, be.Port))
	}
	if !MasqueradePortRange(DefaultEphemeralPorts, DefaultNodePorts).Contains(src.Port()) {
		e.t.Fatalf("node port %d outside the translation range %v", src.Port(), MasqueradePortRange(DefaultEphemeralPorts, DefaultNodePorts))
	}
	if want == actRedirect && e.node.Mode == spec.Native && !bytes.Equal(frame[0:6], macNext) {
		e.t.Fatalf("next hop MAC %x, want %x", frame[0:6], macNext)
	}
	return src.Port()
}

// deliveredLocal sends the world's SYN to f and wants it in pod A at be
// with the client's address kept.
func (e *env) deliveredLocal(p pkt, be spec.Backend) {
	e.t.Helper()
	src, dst, frame := e.sends(e.fromNetdev, p, actRedirect)
	if src != ap(p.src, p.sport) || dst != ap(be.Address, be.Port) || !bytes.Equal(frame[0:6], macA) {
		e.t.Fatalf("delivered as %v -> %v to MAC %x, want %v -> %v into A", src, dst, frame[0:6],
			ap(p.src, p.sport), ap(be.Address, be.Port))
	}
}

// passes runs p through from-netdev and wants it handed to the stack as
// it came.
func (e *env) passes(p pkt) {
	e.t.Helper()
	in := p.frame(e.t)
	got, out := e.run(e.fromNetdev, in)
	if got != actOK || !bytes.Equal(out, in) {
		e.t.Fatalf("%v -> %v: verdict %d, frame %x; want it to the stack untouched (events %+v)",
			p.src, p.dst, got, out, e.drain())
	}
}

// Forward translation of clients from outside.
func TestPrivilegedProgNodePortForward(t *testing.T) {
	runProgCases(t, []progCase{
		// Proves nodeport_ingress's local delivery and the connection's
		// CT_F_NODEPORT: without them the SYN goes to the stack for the
		// node's address.
		{"a local backend gets the client's packet with the client's address", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beA)
			e.deliveredLocal(clientSYN(npTCP, 40000), beA)
			ce, ok := e.ctEntry(tcp(ipWorld, ipA, 40000, 8080, "S"))
			if !ok || ce.RevNatIndex != revNATOf(npTCP) || ce.Flags&ctFlagNodePort == 0 || ce.SrcIdentity != uint32(identity.World) {
				t.Fatalf("connection %+v (found %v), want north-south from the world with reverse NAT %d", ce, ok, revNATOf(npTCP))
			}
		}},
		// Proves that ingress policy judges the client: the world is not
		// allowed to A's port, so the translated SYN drops there.
		{"ingress policy judges the client's identity", envOpts{policyIngress: true}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beA)
			ev := e.denied(e.fromNetdev, clientSYN(npTCP, 40000), spec.DropPolicy)
			if ev.Src != ipWorld || ev.SrcIdentity != identity.World || ev.Dst != ipA || ev.DstPort != 8080 {
				t.Fatalf("drop %+v, want the world's packet to the backend", ev)
			}
			e.setPolicy(epA, ingressRule(uint32(identity.World), tcpProto, 8080, 0))
			e.deliveredLocal(clientSYN(npTCP, 40001), beA)
		}},
		// Proves the source translation (SNAT mode) and its entries:
		// without it the backend would answer the client directly.
		{"a remote backend gets the packet from the node", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			port := e.forwardedRemote(npTCP, beC, 40000, actRedirect)
			var v NATEntry
			rk := NATKey{Saddr: be32(ipC), Daddr: be32(nodeIP), Sport: htons(8080), Dport: htons(port),
				Protocol: tcpProto, Dir: uint8(spec.Ingress)}
			must(t, e.maps.SNAT4.Lookup(&rk, &v))
			if addrOfBE32(v.Addr) != ipWorld || htons(v.Port) != 40000 || v.RevNatIndex != revNATOf(npTCP) {
				t.Fatalf("reply mapping %+v, want back to %v:40000 for service %d", v, ipWorld, revNATOf(npTCP))
			}
			// The connection keeps its port.
			src, _, _ := e.sends(e.fromNetdev, outside(toFront(ipWorld, 40000, npTCP, "A")), actRedirect)
			if src.Port() != port {
				t.Fatalf("second packet from port %d, first %d", src.Port(), port)
			}
		}},
		// The map is an LRU: it may evict the entry that translates a
		// flow's replies and keep the one that translates its packets.
		// The flow's next packet claims the reply's entry again, or, when
		// another flow holds the tuple by then, moves to a new port:
		// without that its replies would be lost for as long as it lasts.
		{"a flow whose reply entry was evicted gets it back", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			port := e.forwardedRemote(npTCP, beC, 40000, actRedirect)
			rk := NATKey{Saddr: be32(ipC), Daddr: be32(nodeIP), Sport: htons(8080), Dport: htons(port),
				Protocol: tcpProto, Dir: uint8(spec.Ingress)}
			must(t, e.maps.SNAT4.Delete(&rk))
			if src, _, _ := e.sends(e.fromNetdev, outside(toFront(ipWorld, 40000, npTCP, "S")), actRedirect); src.Port() != port {
				t.Fatalf("the flow moved from port %d to %d, though the tuple was free", port, src.Port())
			}
			toClient(t, e.expect(e.fromNetdev, tcp(ipC, nodeIP, 8080, port, "SA").frame(t), actRedirect), npTCP, 40000)

			// Another flow takes the tuple meanwhile: this one moves.
			must(t, e.maps.SNAT4.Delete(&rk))
			other := NATEntry{Addr: be32(netip.MustParseAddr("1.1.1.9")), Port: htons(1234), RevNatIndex: revNATOf(npTCP)}
			must(t, e.maps.SNAT4.Put(&rk, &other))
			src, _, _ := e.sends(e.fromNetdev, outside(toFront(ipWorld, 40000, npTCP, "S")), actRedirect)
			if src.Port() == port {
				t.Fatalf("the flow kept port %d, whose replies go to another client", port)
			}
			toClient(t, e.expect(e.fromNetdev, tcp(ipC, nodeIP, 8080, src.Port(), "SA").frame(t), actRedirect), npTCP, 40000)
		}},
		{"tunnel mode: the backend's node gets it through the tunnel", envOpts{mode: spec.Tunnel, trace: true}, func(t *testing.T, e *env) {
			e.serve(npUDP, spec.LBNodePort, udpBeC)
			src, dst, _ := e.sends(e.fromNetdev, outside(toFront(ipWorld, 5000, npUDP, "")), actRedirect)
			evs := e.drain()
			if src.Addr() != nodeIP || dst != ap(ipC, 5353) || len(evs) != 1 || evs[0].Point != spec.TraceToOverlay ||
				evs[0].DstIdentity != idC {
				t.Fatalf("sent %v -> %v, events %+v: want one trace to the overlay", src, dst, evs)
			}
		}},
		{"an ExternalIP is served like a NodePort", envOpts{}, func(t *testing.T, e *env) {
			e.serve(extTCP, spec.LBExternalIP, beC)
			port := e.forwardedRemote(extTCP, beC, 40000, actRedirect)
			frame := e.expect(e.fromNetdev, tcp(ipC, nodeIP, 8080, port, "SA").frame(t), actRedirect)
			toClient(t, frame, extTCP, 40000)
		}},
		{"a LoadBalancer address is served like a NodePort", envOpts{}, func(t *testing.T, e *env) {
			e.serve(extTCP, spec.LBLoadBalancer, beC)
			port := e.forwardedRemote(extTCP, beC, 40000, actRedirect)
			frame := e.expect(e.fromNetdev, tcp(ipC, nodeIP, 8080, port, "SA").frame(t), actRedirect)
			toClient(t, frame, extTCP, 40000)
		}},
		// One client port to one backend through two frontends, as Linux
		// picks source ports per destination: two flows, each with its
		// own node port, each answered from its own frontend. With one
		// translation for both, the second flow's replies would come back
		// from the first frontend, which the client drops.
		{"one client port through two frontends to one backend: two flows", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			e.serve(extTCP, spec.LBLoadBalancer, beC)
			np := e.forwardedRemote(npTCP, beC, 40000, actRedirect)
			lb := e.forwardedRemote(extTCP, beC, 40000, actRedirect)
			if np == lb {
				t.Fatalf("both flows leave from node port %d", np)
			}
			toClient(t, e.expect(e.fromNetdev, tcp(ipC, nodeIP, 8080, lb, "SA").frame(t), actRedirect), extTCP, 40000)
			toClient(t, e.expect(e.fromNetdev, tcp(ipC, nodeIP, 8080, np, "SA").frame(t), actRedirect), npTCP, 40000)
		}},
		{"a HostPort reaches its pod, never another node", envOpts{}, func(t *testing.T, e *env) {
			e.serve(hostPort, spec.LBHostPort, beA)
			e.deliveredLocal(clientSYN(hostPort, 40000), beA)
			e.serve(hostPort, spec.LBHostPort, beC)
			e.denied(e.fromNetdev, clientSYN(hostPort, 40001), spec.DropNoService)
		}},
		// Proves the refusal: without it the SYN would go to the stack,
		// which has nothing on the port, or time out.
		{"no backend: the client is refused out of the uplink", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort)
			p := clientSYN(npTCP, 40000)
			frame := e.expect(e.fromNetdev, p.frame(t), actRedirect)
			ip, pk := decoded(t, frame)
			ic, _ := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
			if ic == nil || ic.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, 3) ||
				!ip.SrcIP.Equal(nodeIP.AsSlice()) || !ip.DstIP.Equal(ipWorld.AsSlice()) {
				t.Fatalf("answer %v, want a port unreachable from %v to %v", pk, nodeIP, ipWorld)
			}
			if !bytes.Equal(frame[0:6], macNext) || !bytes.Equal(frame[6:12], uplinkMAC) {
				t.Fatalf("answer MACs %x -> %x, want back to the next hop", frame[6:12], frame[0:6])
			}
			evs := e.drain()
			if len(evs) != 1 || evs[0].Reason != spec.DropNoService || evs[0].Src != ipWorld || evs[0].Dst != nodeIP {
				t.Fatalf("events %+v, want one drop for no service", evs)
			}
		}},
		// Proves that local clients keep the internal path (lb4_local):
		// a pod reaching a NodePort is not translated to the node.
		{"a local pod reaches a NodePort from its own address", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			src, dst, _ := e.sends(e.fromContainer, toFront(ipA, 40000, npTCP, "S"), actRedirect)
			if src != ap(ipA, 40000) || dst != ap(ipC, 8080) {
				t.Fatalf("A's SYN left as %v -> %v", src, dst)
			}
		}},
	})
}

// externalTrafficPolicy: Local keeps the client's address and serves
// from local backends only.
func TestPrivilegedProgNodePortLocal(t *testing.T) {
	local := spec.LBNodePort | spec.LBLocal
	runProgCases(t, []progCase{
		{"a local backend sees the client's address", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, local, beA)
			e.deliveredLocal(clientSYN(npTCP, 40000), beA)
		}},
		// Proves the LB_F_LOCAL check: without it the packet would be
		// translated and sent to C.
		{"a remote backend is never used and nothing is translated", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, local, beC)
			e.denied(e.fromNetdev, clientSYN(npTCP, 40000), spec.DropNoService)
			var k NATKey
			var v NATEntry
			if e.maps.SNAT4.Iterate().Next(&k, &v) {
				t.Fatalf("translation %+v -> %+v made", k, v)
			}
		}},
		// Proves the drop: a refusal would tell a load balancer's client
		// the service is closed, where kube-proxy drops.
		{"no local backend: dropped, not refused", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, local)
			e.denied(e.fromNetdev, clientSYN(npTCP, 40000), spec.DropNoService)
		}},
	})
}

// Replies reach the client from the frontend, whichever way they come.
func TestPrivilegedProgNodePortReply(t *testing.T) {
	localReply := func(t *testing.T, e *env) {
		e.serve(npTCP, spec.LBNodePort, beA)
		e.expect(e.fromNetdev, clientSYN(npTCP, 40000).frame(t), actRedirect)
		toClient(t, e.expect(e.fromContainer, tcp(ipA, ipWorld, 8080, 40000, "SA").frame(t), actRedirect), npTCP, 40000)
	}
	runProgCases(t, []progCase{
		// Proves nodeport_to_client in from-container: without it the
		// reply leaves as A's.
		{"a local backend's reply leaves from the frontend", envOpts{}, localReply},
		// Proves that the reply is no pod flow to the world: it is not
		// masqueraded to another port.
		{"masquerading: the reply keeps the frontend's port", envOpts{masquerade: true}, localReply},
		// Proves that the reply skips the stack, which would take the
		// node's own source address for a martian.
		{"legacy routing: the reply is routed, not handed to the stack", envOpts{legacyRouting: true}, localReply},
		{"netkit: the reply is routed from the pod's transmit", envOpts{netkit: true}, localReply},
		// Proves nodeport_reply: the reply mapping gives the client back,
		// the reverse NAT entry the frontend.
		{"a remote backend's reply goes back to the client", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			port := e.forwardedRemote(npTCP, beC, 40000, actRedirect)
			toClient(t, e.expect(e.fromNetdev, tcp(ipC, nodeIP, 8080, port, "SA").frame(t), actRedirect), npTCP, 40000)
		}},
		{"masquerading: a remote backend's reply too", envOpts{masquerade: true}, func(t *testing.T, e *env) {
			e.serve(npUDP, spec.LBNodePort, udpBeC)
			src, _, _ := e.sends(e.fromNetdev, outside(toFront(ipWorld, 5000, npUDP, "")), actRedirect)
			toClient(t, e.expect(e.fromNetdev, udp(ipC, nodeIP, 5353, src.Port()).frame(t), actRedirect), npUDP, 5000)
		}},
		// Proves the tunnel's path: from-overlay translates NodePort
		// replies although it leaves masquerading's alone.
		{"tunnel mode: the reply through the tunnel", envOpts{mode: spec.Tunnel, vni: idC}, func(t *testing.T, e *env) {
			e.serve(npUDP, spec.LBNodePort, udpBeC)
			src, _, _ := e.sends(e.fromNetdev, outside(toFront(ipWorld, 5000, npUDP, "")), actRedirect)
			toClient(t, e.expect(e.fromOverlay, udp(ipC, nodeIP, 5353, src.Port()).frame(t), actRedirect), npUDP, 5000)
		}},
		// Proves nodeport_to_host and nodeport_host_reply: a backend in
		// the node's own network (a hostNetwork pod) gets the client's
		// packet through the stack, and the node's reply leaves the
		// uplink from the frontend; without them the packet was
		// translated at its source too and routed back to the node.
		{"a backend in the node's own network: through the stack, the reply from the frontend", envOpts{}, func(t *testing.T, e *env) {
			hostBe := spec.Backend{ID: 99, Address: nodeIP, Port: 8080, Protocol: spec.ProtoTCP}
			e.serve(npTCP, spec.LBNodePort, hostBe)
			if src, dst, _ := e.sends(e.fromNetdev, clientSYN(npTCP, 40000), actOK); src != ap(ipWorld, 40000) || dst != ap(nodeIP, 8080) {
				t.Fatalf("to the stack as %v -> %v, want %v -> %v", src, dst, ap(ipWorld, 40000), ap(nodeIP, 8080))
			}
			if src, dst, _ := e.sends(e.toNetdev, tcp(nodeIP, ipWorld, 8080, 40000, "SA"), actOK); src != ap(nodeIP, 30080) || dst != ap(ipWorld, 40000) {
				t.Fatalf("the reply left as %v -> %v, want %v -> %v", src, dst, ap(nodeIP, 30080), ap(ipWorld, 40000))
			}
			// The node's own connections are nobody's business.
			if src, _, _ := e.sends(e.toNetdev, tcp(nodeIP, ipWorld, 8080, 40001, "SA"), actOK); src != ap(nodeIP, 8080) {
				t.Fatalf("an untracked packet of the node left as %v, want it untouched", src)
			}
		}},
		// The backend's address must never reach the client.
		{"a reply whose service is gone drops", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			port := e.forwardedRemote(npTCP, beC, 40000, actRedirect)
			must(t, e.maps.DeleteRevNAT(revNATOf(npTCP)))
			e.denied(e.fromNetdev, tcp(ipC, nodeIP, 8080, port, "SA"), spec.DropNATNoMapping)
		}},
	})
}

// ICMP errors of a translated flow are translated like the flow.
func TestPrivilegedProgNodePortICMP(t *testing.T) {
	runProgCases(t, []progCase{
		// Proves lb4_rev_nat_icmp_index after snat_icmp_error: the
		// client's socket takes only errors that quote its own packet.
		{"a remote backend's error reaches the client as the frontend's", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npUDP, spec.LBNodePort, udpBeC)
			src, _, _ := e.sends(e.fromNetdev, outside(toFront(ipWorld, 5000, npUDP, "")), actRedirect)
			unreach := unreachable(t, ipC, nodeIP, udp(nodeIP, ipC, src.Port(), 5353))
			s, d, frame := e.sends(e.fromNetdev, unreach, actRedirect)
			qs, qd := quotedTuple(t, frame)
			if s.Addr() != nodeIP || d.Addr() != ipWorld || qs != ap(ipWorld, 5000) || qd != ap(nodeIP, 30053) {
				t.Fatalf("error %v -> %v quoting %v -> %v", s.Addr(), d.Addr(), qs, qd)
			}
		}},
		// Proves nodeport_to_client's error branch in from-container.
		{"a local backend's error reaches the client as the frontend's", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npUDP, spec.LBNodePort, udpBeA)
			e.expect(e.fromNetdev, outside(toFront(ipWorld, 5000, npUDP, "")).frame(t), actRedirect)
			unreach := unreachable(t, ipA, ipWorld, udp(ipWorld, ipA, 5000, 5353))
			s, d, frame := e.sends(e.fromContainer, unreach, actRedirect)
			qs, qd := quotedTuple(t, frame)
			if s.Addr() != nodeIP || d.Addr() != ipWorld || qs != ap(ipWorld, 5000) || qd != ap(nodeIP, 30053) {
				t.Fatalf("error %v -> %v quoting %v -> %v", s.Addr(), d.Addr(), qs, qd)
			}
		}},
		// Proves nodeport_icmp_in for a remote backend: the client's
		// refusal of the node's reply reaches the backend about its own
		// packet, from the node, as SNAT implies.
		{"the client's error about a reply reaches the remote backend", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			port := e.forwardedRemote(npTCP, beC, 40000, actRedirect)
			unreach := outside(unreachable(t, ipWorld, nodeIP, tcp(nodeIP, ipWorld, 30080, 40000, "SA")))
			s, d, frame := e.sends(e.fromNetdev, unreach, actRedirect)
			qs, qd := quotedTuple(t, frame)
			if s.Addr() != nodeIP || d.Addr() != ipC || qs != ap(ipC, 8080) || qd != ap(nodeIP, port) {
				t.Fatalf("error %v -> %v quoting %v -> %v, want %v -> %v quoting %v -> %v", s.Addr(), d.Addr(), qs, qd,
					nodeIP, ipC, ap(ipC, 8080), ap(nodeIP, port))
			}
		}},
		// Proves nodeport_icmp_in for a local backend: the error is
		// related to A's connection, so it needs no policy.
		{"the client's error about a reply reaches the local backend", envOpts{policyIngress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, ingressRule(uint32(identity.World), udpProto, 5353, 0))
			e.serve(npUDP, spec.LBNodePort, udpBeA)
			e.expect(e.fromNetdev, outside(toFront(ipWorld, 5000, npUDP, "")).frame(t), actRedirect)
			unreach := outside(unreachable(t, ipWorld, nodeIP, udp(nodeIP, ipWorld, 30053, 5000)))
			s, d, frame := e.sends(e.fromNetdev, unreach, actRedirect)
			qs, qd := quotedTuple(t, frame)
			if s.Addr() != ipWorld || d.Addr() != ipA || qs != ap(ipA, 5353) || qd != ap(ipWorld, 5000) ||
				!bytes.Equal(frame[0:6], macA) {
				t.Fatalf("error %v -> %v quoting %v -> %v", s.Addr(), d.Addr(), qs, qd)
			}
		}},
	})
}

// What an attacker outside the node sends is translated only as a
// north-south flow allows.
func TestPrivilegedProgNodePortAttacks(t *testing.T) {
	runProgCases(t, []progCase{
		// Proves the external-kind check: a ClusterIP serves local
		// clients only, as behind kube-proxy.
		{"a ClusterIP is not served from outside", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beA)
			e.passes(outside(toFront(ipWorld, 40000, tcpFront, "S")))
			if _, ok := e.serviceEntry(ipWorld, 40000, tcpFront); ok {
				t.Fatal("the packet made a service entry")
			}
		}},
		// Proves that only an exact reply mapping translates: the
		// backend's address and port, the node's port.
		{"a forged reply to a node port is not translated", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			port := e.forwardedRemote(npTCP, beC, 40000, actRedirect)
			e.passes(outside(tcp(ipC, nodeIP, 8080, 12345, "SA")))
			e.passes(outside(tcp(ipD, nodeIP, 8080, port, "SA")))
			e.passes(outside(tcp(ipWorld, nodeIP, 443, port, "SA")))
		}},
		// Proves the hairpin check at the node's devices.
		{"the hairpin source from outside drops", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beA)
			e.denied(e.fromNetdev, outside(tcp(HairpinIPv4, nodeIP, 40000, 30080, "S")), spec.DropInvalidSource)
			e.denied(e.fromNetdev, outside(tcp(HairpinIPv4, ipA, 40000, 8080, "SA")), spec.DropInvalidSource)
		}},
		{"the hairpin source through the tunnel drops", envOpts{mode: spec.Tunnel, vni: idC}, func(t *testing.T, e *env) {
			e.denied(e.fromOverlay, tcp(HairpinIPv4, ipA, 40000, 8080, "SA"), spec.DropInvalidSource)
		}},
		// Proves that errors are translated only for north-south flows
		// they quote: one about no flow, and one about a pod's
		// east-west connection, are left to the stack.
		{"spoofed ICMP errors quoting no translated flow are left alone", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beC)
			e.forwardedRemote(npTCP, beC, 40000, actRedirect)
			e.passes(outside(unreachable(t, ipWorld, nodeIP, tcp(nodeIP, ipWorld, 30080, 40001, "SA"))))
			e.passes(outside(unreachable(t, ipWorld, nodeIP, tcp(nodeIP, ipD, 30080, 40000, "SA"))))
			e.serve(tcpFront, 0, beC)
			e.backendFor(40000, tcpFront)
			e.passes(outside(unreachable(t, ipWorld, svcIP, tcp(svcIP, ipA, 80, 40000, "SA"))))
		}},
	})
}
