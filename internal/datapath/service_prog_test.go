package datapath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// The services of these tests: svcIP is a ClusterIP that no ipcache
// entry names. Backends are the topology's pods on port 8080 (TCP) or
// 5353 (UDP); beA makes A reach itself (hairpin).
var (
	svcIP    = netip.MustParseAddr("172.20.0.10")
	tcpFront = spec.Frontend{Address: svcIP, Port: 80, Protocol: spec.ProtoTCP}
	udpFront = spec.Frontend{Address: svcIP, Port: 53, Protocol: spec.ProtoUDP}

	beC    = spec.Backend{ID: 1, Address: ipC, Port: 8080, Protocol: spec.ProtoTCP}
	beD    = spec.Backend{ID: 2, Address: ipD, Port: 8080, Protocol: spec.ProtoTCP}
	beB    = spec.Backend{ID: 3, Address: ipB, Port: 8080, Protocol: spec.ProtoTCP}
	beA    = spec.Backend{ID: 4, Address: ipA, Port: 8080, Protocol: spec.ProtoTCP}
	udpBeC = spec.Backend{ID: 5, Address: ipC, Port: 5353, Protocol: spec.ProtoUDP}
	udpBeD = spec.Backend{ID: 6, Address: ipD, Port: 5353, Protocol: spec.ProtoUDP}
	udpBeA = spec.Backend{ID: 7, Address: ipA, Port: 5353, Protocol: spec.ProtoUDP}
)

// revNATOf is the reverse NAT index the tests give a frontend.
func revNATOf(f spec.Frontend) uint16 { return f.Port }

// serve makes f balance over bs, in slot order, as the control plane
// writes a service: backends, reverse NAT, then the frontend.
func (e *env) serve(f spec.Frontend, flags spec.LBFlags, bs ...spec.Backend) {
	e.t.Helper()
	ids := []spec.BackendID{}
	for _, b := range bs {
		must(e.t, e.maps.UpsertBackend(b))
		ids = append(ids, b.ID)
	}
	must(e.t, e.maps.UpsertRevNAT(spec.RevNAT{Index: revNATOf(f), Address: f.Address, Port: f.Port}))
	must(e.t, e.maps.UpsertService(spec.Service{Frontend: f, Backends: ids, RevNATIndex: revNATOf(f),
		Flags: flags, AffinityTimeout: 60}))
}

// toFront is a client's packet to a frontend.
func toFront(client netip.Addr, sport uint16, f spec.Frontend, flags string) pkt {
	if f.Protocol == spec.ProtoUDP {
		return udp(client, f.Address, sport, f.Port)
	}
	return tcp(client, f.Address, sport, f.Port, flags)
}

// fromB dresses p as pod B sends it to its gateway.
func fromB(p pkt) pkt {
	p.srcMAC, p.dstMAC = macB, hostMacB
	return p
}

// loadB loads endpoint B's programs on e's maps, as the agent does for a
// second pod on the node, so that B can be a client of A's services.
func (e *env) loadB(netkit bool) *EndpointPrograms {
	e.t.Helper()
	lxc, err := LoadEndpointPrograms(e.maps, EndpointConstants{NodeConstants: e.node, ID: epB, Identity: idB,
		IPv4: ipB, Netkit: netkit})
	must(e.t, err)
	e.t.Cleanup(func() { lxc.Close() })
	return lxc
}

// tuple is what a frame the programs left says, its checksums checked.
func tuple(t testing.TB, frame []byte) (src, dst netip.AddrPort) {
	t.Helper()
	ip, p := decoded(t, frame)
	sport, dport := ports(p)
	s, _ := netip.AddrFromSlice(ip.SrcIP.To4())
	d, _ := netip.AddrFromSlice(ip.DstIP.To4())
	return netip.AddrPortFrom(s, sport), netip.AddrPortFrom(d, dport)
}

func ap(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

// sends runs p through prog, wants it passed on (redirected or to the
// stack, per want) and returns the tuple it leaves with.
func (e *env) sends(prog *ebpf.Program, p pkt, want uint32) (src, dst netip.AddrPort, frame []byte) {
	e.t.Helper()
	frame = e.expect(prog, p.frame(e.t), want)
	src, dst = tuple(e.t, frame)
	return src, dst, frame
}

func (e *env) serviceEntry(client netip.Addr, sport uint16, f spec.Frontend) (CTEntry, bool) {
	e.t.Helper()
	k := CTKey{Saddr: be32(client), Daddr: be32(f.Address), Sport: htons(sport), Dport: htons(f.Port),
		Protocol: f.Protocol, Flags: ctKeyService}
	var v CTEntry
	err := e.maps.CT4.Lookup(&k, &v)
	return v, err == nil
}

// backendFor sends a new connection from A to f and returns the backend
// address it went to.
func (e *env) backendFor(sport uint16, f spec.Frontend) netip.Addr {
	e.t.Helper()
	_, dst, _ := e.sends(e.fromContainer, toFront(ipA, sport, f, "S"), actRedirect)
	return dst.Addr()
}

// fragment decodes an IPv4 fragment, whose transport gopacket leaves
// alone, checking its header checksum.
func fragment(t testing.TB, frame []byte) *layers.IPv4 {
	t.Helper()
	ip, _ := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default).Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip == nil {
		t.Fatalf("no IPv4 in %x", frame)
		return nil // staticcheck does not know that a testing.TB's Fatalf ends the test
	}
	check := ip.Checksum
	buf := gopacket.NewSerializeBuffer()
	must(t, ip.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: true}))
	if ip.Checksum != check {
		t.Fatalf("header checksum %#x, want %#x", check, ip.Checksum)
	}
	return ip
}

// quotedTuple returns what an ICMP error quotes, checking the quoted IP
// header's checksum (decoded checks the outer ones).
func quotedTuple(t testing.TB, frame []byte) (src, dst netip.AddrPort) {
	t.Helper()
	_, p := decoded(t, frame)
	raw := p.Layer(layers.LayerTypeICMPv4).LayerPayload()
	q := gopacket.NewPacket(raw, layers.LayerTypeIPv4, gopacket.Default)
	qip, _ := q.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if qip == nil {
		t.Fatalf("no quoted IPv4 in %x", raw)
		return // as in fragment
	}
	check := qip.Checksum
	buf := gopacket.NewSerializeBuffer()
	must(t, qip.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: true}))
	if qip.Checksum != check {
		t.Fatalf("quoted header checksum %#x, want %#x", check, qip.Checksum)
	}
	l4 := raw[qip.IHL*4:]
	s, _ := netip.AddrFromSlice(qip.SrcIP.To4())
	d, _ := netip.AddrFromSlice(qip.DstIP.To4())
	return ap(s, uint16(l4[0])<<8|uint16(l4[1])), ap(d, uint16(l4[2])<<8|uint16(l4[3]))
}

// Forward translation: a pod's packet to a frontend leaves for a backend
// with valid checksums, and the connection keeps its backend.
func TestPrivilegedProgServiceForward(t *testing.T) {
	runProgCases(t, []progCase{
		// Proves the DNAT itself, its checksums (decoded) and both
		// conntrack entries: without lb4_local the SYN leaves for svcIP.
		{"a SYN to a frontend leaves for its backend", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beC)
			src, dst, frame := e.sends(e.fromContainer, toFront(ipA, 40000, tcpFront, "S"), actRedirect)
			if src != ap(ipA, 40000) || dst != ap(ipC, 8080) {
				t.Fatalf("left as %v -> %v, want %v -> %v", src, dst, ap(ipA, 40000), ap(ipC, 8080))
			}
			if !bytes.Equal(frame[0:6], macNext) {
				t.Fatalf("next hop MAC %x, want %x (routed to the backend)", frame[0:6], macNext)
			}
			se, ok := e.serviceEntry(ipA, 40000, tcpFront)
			if !ok || se.BackendId != uint32(beC.ID) || se.RevNatIndex != revNATOf(tcpFront) {
				t.Fatalf("service entry %+v (found %v), want backend %d", se, ok, beC.ID)
			}
			ce, ok := e.ctEntry(tcp(ipA, ipC, 40000, 8080, "S"))
			if !ok || ce.RevNatIndex != revNATOf(tcpFront) || ce.DstIdentity != idC {
				t.Fatalf("translated connection %+v (found %v), want reverse NAT %d to identity %d",
					ce, ok, revNATOf(tcpFront), idC)
			}
		}},
		// kube-proxy's iptables translate a flow at its first packet only:
		// a SYN sent before the rules existed leaves conntrack state that
		// keeps every later SYN of that port untranslated. Here every
		// packet looks the frontend up.
		{"a port first used before its frontend existed is translated once it does", envOpts{}, func(t *testing.T, e *env) {
			before := toFront(ipA, 40000, tcpFront, "S")
			if _, dst, _ := e.sends(e.fromContainer, before, actOK); dst != ap(svcIP, 80) {
				t.Fatalf("before the frontend: left for %v, want %v untranslated", dst, ap(svcIP, 80))
			}
			e.serve(tcpFront, 0, beC)
			if _, dst, _ := e.sends(e.fromContainer, before, actRedirect); dst != ap(ipC, 8080) {
				t.Fatalf("the same SYN after the frontend appeared left for %v, want %v", dst, ap(ipC, 8080))
			}
		}},
		// Proves the service entry: with several backends, a random pick
		// per packet would scatter one connection's packets.
		{"every packet of a connection goes to the same backend", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beC, beD, beB)
			first := e.backendFor(40000, tcpFront)
			for i := 0; i < 16; i++ {
				_, dst, _ := e.sends(e.fromContainer, toFront(ipA, 40000, tcpFront, "A"), actRedirect)
				if dst.Addr() != first {
					t.Fatalf("packet %d went to %v, the connection's first to %v", i, dst, first)
				}
			}
			seen := map[netip.Addr]bool{}
			for i := 0; i < 32; i++ {
				seen[e.backendFor(uint16(41000+i), tcpFront)] = true
			}
			if len(seen) < 2 {
				t.Fatalf("32 connections all went to %v: new connections are not spread", seen)
			}
		}},
		{"tunnel mode: the backend's node gets the packet", envOpts{mode: spec.Tunnel, trace: true}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beC)
			_, dst, _ := e.sends(e.fromContainer, toFront(ipA, 40000, tcpFront, "S"), actRedirect)
			evs := e.drain()
			if dst != ap(ipC, 8080) || len(evs) != 1 || evs[0].Point != spec.TraceToOverlay ||
				evs[0].Dst != ipC || evs[0].DstPort != 8080 || evs[0].DstIdentity != idC {
				t.Fatalf("sent to %v, events %+v: want one trace to the overlay naming the backend", dst, evs)
			}
		}},
		{"a local backend is reached through its peer", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beB)
			_, dst, frame := e.sends(e.fromContainer, toFront(ipA, 40000, tcpFront, "S"), actRedirect)
			if dst != ap(ipB, 8080) || !bytes.Equal(frame[0:6], macB) {
				t.Fatalf("sent to %v MAC %x, want %v MAC %x", dst, frame[0:6], ap(ipB, 8080), macB)
			}
		}},
		{"UDP and SCTP frontends are translated", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeC)
			if _, dst, _ := e.sends(e.fromContainer, toFront(ipA, 5000, udpFront, ""), actRedirect); dst != ap(ipC, 5353) {
				t.Fatalf("UDP sent to %v, want %v", dst, ap(ipC, 5353))
			}
			// SCTP's CRC32c covers no address; gopacket does not check it.
			sctpFront := spec.Frontend{Address: svcIP, Port: 3868, Protocol: spec.ProtoSCTP}
			e.serve(sctpFront, 0, spec.Backend{ID: 9, Address: ipC, Port: 3868, Protocol: spec.ProtoSCTP})
			out := e.expect(e.fromContainer, sctp(ipA, svcIP, 5000, 3868).frame(t), actRedirect)
			p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
			ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if ip == nil || !ip.DstIP.Equal(ipC.AsSlice()) {
				t.Fatalf("SCTP sent to %v, want %v", ip, ipC)
			}
		}},
		// Proves that policy judges the backend: the allow names C's
		// identity and port 8080, nothing about the frontend.
		{"egress policy judges the backend", envOpts{policyEgress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 8080, 0))
			e.serve(tcpFront, 0, beC)
			e.allowed(e.fromContainer, toFront(ipA, 40000, tcpFront, "S"))
			e.serve(tcpFront, 0, beD)
			ev := e.denied(e.fromContainer, toFront(ipA, 40001, tcpFront, "S"), spec.DropPolicy)
			if ev.Dst != ipD || ev.DstPort != 8080 || ev.DstIdentity != idD {
				t.Fatalf("drop event %+v, want the backend %v:8080 with identity %d", ev, ipD, idD)
			}
		}},
		// Proves that a later fragment is translated too, by the ports its
		// first fragment left in the frag map, and keeps its payload.
		{"later fragments of a translated UDP flow follow the first", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeC)
			first := toFront(ipA, 5000, udpFront, "")
			first.ipID, first.moreFrags = 9, true
			ip := fragment(t, e.expect(e.fromContainer, first.frame(t), actRedirect))
			if !ip.DstIP.Equal(ipC.AsSlice()) || ip.Payload[2] != 5353>>8 || ip.Payload[3] != 5353&0xff {
				t.Fatalf("first fragment sent to %v port %x", ip.DstIP, ip.Payload[2:4])
			}
			later := udp(ipA, svcIP, 0, 0)
			later.ipID, later.fragOffset, later.payload = 9, 4, []byte("12345678")
			ip = fragment(t, e.expect(e.fromContainer, later.frame(t), actRedirect))
			if !ip.DstIP.Equal(ipC.AsSlice()) || !bytes.Equal(ip.Payload, later.payload) {
				t.Fatalf("later fragment %v, want to %v with its payload untouched", ip, ipC)
			}
			// The reply's fragments come back from the frontend.
			reply := udp(ipC, ipA, 5353, 5000)
			reply.ipID, reply.moreFrags = 11, true
			ip = fragment(t, e.expect(e.fromNetdev, reply.frame(t), actRedirect))
			if !ip.SrcIP.Equal(svcIP.AsSlice()) || ip.Payload[0] != 0 || ip.Payload[1] != 53 {
				t.Fatalf("first reply fragment from %v port %x", ip.SrcIP, ip.Payload[0:2])
			}
			laterReply := udp(ipC, ipA, 0, 0)
			laterReply.ipID, laterReply.fragOffset = 11, 4
			ip = fragment(t, e.expect(e.fromNetdev, laterReply.frame(t), actRedirect))
			if !ip.SrcIP.Equal(svcIP.AsSlice()) {
				t.Fatalf("later reply fragment %v, want from %v", ip, svcIP)
			}
		}},
		// Non-service traffic is untouched: the other forwarding tests
		// run with the lookup in place; here the frontend's own address on
		// another port and protocol.
		{"only the frontend's port and protocol are translated", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beC)
			for _, p := range []pkt{
				tcp(ipA, svcIP, 40000, 81, "S"),
				udp(ipA, svcIP, 40000, 80),
				echo(ipA, svcIP, 7, false),
			} {
				in := p.frame(t)
				got, out := e.run(e.fromContainer, in)
				if got == actShot {
					t.Fatalf("%v dropped: %+v", p, e.drain())
				}
				ip, _ := decoded(t, out)
				if !ip.DstIP.Equal(svcIP.AsSlice()) {
					t.Fatalf("%v: sent to %v, want it untranslated", p.proto, ip.DstIP)
				}
			}
		}},
	})
}

// Reverse translation: wherever a reply first meets the client's node,
// it leaves with the frontend as its source.
func TestPrivilegedProgServiceReverse(t *testing.T) {
	runProgCases(t, []progCase{
		// Proves the translation in deliver_ingress: a remote backend's
		// reply arrives from the network into the client.
		{"a remote backend's reply comes from the frontend", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beC)
			e.backendFor(40000, tcpFront)
			src, dst, frame := e.sends(e.fromNetdev, tcp(ipC, ipA, 8080, 40000, "SA"), actRedirect)
			if src != ap(svcIP, 80) || dst != ap(ipA, 40000) || !bytes.Equal(frame[0:6], macA) {
				t.Fatalf("reply %v -> %v, want %v -> %v into A", src, dst, ap(svcIP, 80), ap(ipA, 40000))
			}
		}},
		{"over the overlay too", envOpts{mode: spec.Tunnel, vni: idC}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeC)
			e.backendFor(5000, udpFront)
			if src, _, _ := e.sends(e.fromOverlay, udp(ipC, ipA, 5353, 5000), actRedirect); src != ap(svcIP, 53) {
				t.Fatalf("reply from %v, want %v", src, ap(svcIP, 53))
			}
		}},
		// Proves the translation in from-container: A backs B's service,
		// and A's reply goes straight into B, skipping B's to-container.
		{"a local backend's reply comes from the frontend", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beA)
			b := e.loadB(false)
			_, dst, frame := e.sends(b.FromContainer, fromB(toFront(ipB, 40000, tcpFront, "S")), actRedirect)
			if dst != ap(ipA, 8080) || !bytes.Equal(frame[0:6], macA) {
				t.Fatalf("B's SYN went to %v", dst)
			}
			src, dst, frame := e.sends(e.fromContainer, tcp(ipA, ipB, 8080, 40000, "SA"), actRedirect)
			if src != ap(svcIP, 80) || dst != ap(ipB, 40000) || !bytes.Equal(frame[0:6], macB) {
				t.Fatalf("reply %v -> %v, want %v -> %v into B", src, dst, ap(svcIP, 80), ap(ipB, 40000))
			}
		}},
		// Proves the translation in to-container: with legacy routing the
		// reply crosses the stack and meets the client there.
		{"legacy routing: the reply is translated by the client's to-container", envOpts{legacyRouting: true}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beC)
			if _, dst, _ := e.sends(e.fromContainer, toFront(ipA, 40000, tcpFront, "S"), actOK); dst != ap(ipC, 8080) {
				t.Fatalf("handed to the stack for %v, want the backend", dst)
			}
			in := tcp(ipC, ipA, 8080, 40000, "SA")
			// From the network it goes to the stack untranslated ...
			if src, _, _ := e.sends(e.fromNetdev, in, actOK); src != ap(ipC, 8080) {
				t.Fatalf("from-netdev translated to %v; the client's to-container should", src)
			}
			// ... and into the pod translated.
			in.srcMAC, in.dstMAC = hostMacA, macA
			if src, _, _ := e.sends(e.toContainer, in, actOK); src != ap(svcIP, 80) {
				t.Fatalf("to-container delivered the reply from %v, want %v", src, ap(svcIP, 80))
			}
		}},
		{"legacy routing: a local backend's reply crosses the stack untranslated", envOpts{legacyRouting: true}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beA)
			b := e.loadB(false)
			e.expect(b.FromContainer, fromB(toFront(ipB, 40000, tcpFront, "S")).frame(t), actOK)
			reply := tcp(ipA, ipB, 8080, 40000, "SA")
			if src, _, _ := e.sends(e.fromContainer, reply, actOK); src != ap(ipA, 8080) {
				t.Fatalf("A's reply left as from %v; B's to-container translates it", src)
			}
			reply.srcMAC, reply.dstMAC = hostMacB, macB
			if src, _, _ := e.sends(b.ToContainer, reply, actOK); src != ap(svcIP, 80) {
				t.Fatalf("B's to-container delivered it from %v", src)
			}
		}},
		// On netkit from-container cannot redirect into the client: the
		// client's to-container translates, once.
		{"netkit: a local backend's reply is translated by the client's to-container", envOpts{netkit: true}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beA)
			b := e.loadB(true)
			e.expect(b.FromContainer, fromB(toFront(ipB, 40000, tcpFront, "S")).frame(t), actRedirect)
			reply := tcp(ipA, ipB, 8080, 40000, "SA")
			if src, _, _ := e.sends(e.fromContainer, reply, actRedirect); src != ap(ipA, 8080) {
				t.Fatalf("A's reply left as from %v", src)
			}
			reply.srcMAC, reply.dstMAC = hostMacB, macB
			if src, _, _ := e.sends(b.ToContainer, reply, actOK); src != ap(svcIP, 80) {
				t.Fatalf("B's to-container delivered it from %v", src)
			}
		}},
		// Proves lb4_rev_nat_icmp: the client's socket is connected to the
		// frontend and takes only errors that quote it.
		{"an ICMP error from the backend reaches the client as the frontend's", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeC)
			e.backendFor(5000, udpFront)
			unreach := unreachable(t, ipC, ipA, udp(ipA, ipC, 5000, 5353))
			src, dst, frame := e.sends(e.fromNetdev, unreach, actRedirect)
			qs, qd := quotedTuple(t, frame)
			if src.Addr() != svcIP || dst.Addr() != ipA || qs != ap(ipA, 5000) || qd != ap(svcIP, 53) {
				t.Fatalf("error %v -> %v quoting %v -> %v, want from %v quoting %v -> %v",
					src.Addr(), dst.Addr(), qs, qd, svcIP, ap(ipA, 5000), ap(svcIP, 53))
			}
		}},
		{"a local backend's ICMP error too", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeA)
			b := e.loadB(false)
			e.expect(b.FromContainer, fromB(toFront(ipB, 5000, udpFront, "")).frame(t), actRedirect)
			unreach := unreachable(t, ipA, ipB, udp(ipB, ipA, 5000, 5353))
			src, _, frame := e.sends(e.fromContainer, unreach, actRedirect)
			if qs, qd := quotedTuple(t, frame); src.Addr() != svcIP || qs != ap(ipB, 5000) || qd != ap(svcIP, 53) {
				t.Fatalf("error from %v quoting %v -> %v", src.Addr(), qs, qd)
			}
		}},
		// A router's error (frag needed) is no related packet, but once
		// policy lets it in the client must still match it to its socket.
		{"a router's error about a translated packet quotes the frontend", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beC)
			e.backendFor(40000, tcpFront)
			fragNeeded := unreachable(t, remoteIP, ipA, tcp(ipA, ipC, 40000, 8080, "A"))
			fragNeeded.icmpCode = 4
			src, _, frame := e.sends(e.fromNetdev, fragNeeded, actRedirect)
			if qs, qd := quotedTuple(t, frame); src.Addr() != remoteIP || qs != ap(ipA, 40000) || qd != ap(svcIP, 80) {
				t.Fatalf("error from %v quoting %v -> %v, want from the router quoting the frontend", src.Addr(), qs, qd)
			}
		}},
	})
}
