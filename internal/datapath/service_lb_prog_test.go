package datapath

import (
	"bytes"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// refused runs p, A's packet to a frontend without backends, and checks
// what comes back into A: an ICMP port unreachable from the frontend
// quoting p's first quoteLen bytes, and one DROP_NO_SERVICE event.
func (e *env) refused(p pkt, quoteLen int) {
	e.t.Helper()
	orig := p.ipBytes(e.t)
	frame := e.expect(e.fromContainer, p.frame(e.t), actRedirect)
	ip, pk := decoded(e.t, frame)
	ic, _ := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if ic == nil || ic.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, 3) {
		e.t.Fatalf("answer %v, want an ICMP port unreachable", pk)
	}
	if !ip.SrcIP.Equal(p.dst.AsSlice()) || !ip.DstIP.Equal(p.src.AsSlice()) || ip.TTL != 64 ||
		int(ip.Length) != 20+8+quoteLen {
		e.t.Fatalf("answer %v -> %v TTL %d length %d", ip.SrcIP, ip.DstIP, ip.TTL, ip.Length)
	}
	if !bytes.Equal(frame[0:6], macA) || !bytes.Equal(frame[6:12], hostMacA) {
		e.t.Fatalf("answer MACs %x -> %x, want back to A", frame[6:12], frame[0:6])
	}
	if quote := ic.LayerPayload(); !bytes.Equal(quote, orig[:quoteLen]) {
		e.t.Fatalf("quote %x, want the packet's first %d bytes %x", quote, quoteLen, orig[:quoteLen])
	}
	evs := e.drain()
	if len(evs) != 1 || evs[0].Type != spec.EventDrop || evs[0].Reason != spec.DropNoService || evs[0].Dst != p.dst ||
		evs[0].DstPort != p.dport || evs[0].SrcEndpoint != epA {
		e.t.Fatalf("events %+v, want one drop for no service naming the frontend", evs)
	}
}

// No backend: the client is refused at once, not left to time out.
func TestPrivilegedProgServiceNoBackend(t *testing.T) {
	runProgCases(t, []progCase{
		// Proves lb4_no_service: without it the SYN would leave for the
		// ClusterIP, which nothing answers.
		{"a SYN to a frontend without backends is refused", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0)
			p := toFront(ipA, 40000, tcpFront, "S")
			e.refused(p, len(p.ipBytes(t)))
			if c := e.counter(spec.DropNoService, spec.Egress); c.Packets != 1 {
				t.Fatalf("counter %+v, want one packet", c)
			}
			conns, err := e.maps.Connections()
			must(t, err)
			if len(conns) != 0 {
				t.Fatalf("connections %+v, want none", conns)
			}
		}},
		{"a long datagram is quoted in part", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0)
			p := toFront(ipA, 5000, udpFront, "")
			p.payload = bytes.Repeat([]byte("x"), 400)
			e.refused(p, 96)
		}},
		{"a header with options is quoted whole", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0)
			p := toFront(ipA, 5000, udpFront, "")
			p.ipOptions, p.payload = true, []byte("abc") // odd: the checksum pads
			e.refused(p, len(p.ipBytes(t)))
		}},
		{"slots naming no backend refuse too", envOpts{legacyRouting: true}, func(t *testing.T, e *env) {
			must(t, e.maps.UpsertRevNAT(spec.RevNAT{Index: 80, Address: svcIP, Port: 80}))
			must(t, e.maps.UpsertService(spec.Service{Frontend: tcpFront, Backends: []spec.BackendID{99}, RevNATIndex: 80}))
			p := toFront(ipA, 40000, tcpFront, "S")
			e.refused(p, len(p.ipBytes(t)))
		}},
		// On netkit the answer reaches the pod through its to-container,
		// which must let it in although no policy allows it; a forged
		// refusal of a service that has backends gets no such pass.
		{"netkit: the answer passes the pod's to-container", envOpts{netkit: true, policyIngress: true}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0)
			p := toFront(ipA, 40000, tcpFront, "S")
			e.refused(p, len(p.ipBytes(t)))
			e.expect(e.toContainer, e.expect(e.fromContainer, p.frame(t), actRedirect), actOK)
			e.drain()
			e.serve(tcpFront, 0, beC)
			forged := unreachable(t, svcIP, ipA, p)
			forged.srcMAC, forged.dstMAC = hostMacA, macA
			e.denied(e.toContainer, forged, spec.DropPolicy)
		}},
	})
}

// Hairpin: A reaches itself through its service.
func TestPrivilegedProgServiceHairpin(t *testing.T) {
	hairpin := func(t *testing.T, e *env, want uint32) {
		e.serve(tcpFront, 0, beA)
		// The kernel drops a packet from its own address arriving on
		// eth0: it comes from the hairpin address.
		src, dst, frame := e.sends(e.fromContainer, toFront(ipA, 40000, tcpFront, "S"), want)
		if src != ap(HairpinIPv4, 40000) || dst != ap(ipA, 8080) || !bytes.Equal(frame[0:6], macA) {
			t.Fatalf("sent %v -> %v (MAC %x), want %v -> %v back into A",
				src, dst, frame[0:6], ap(HairpinIPv4, 40000), ap(ipA, 8080))
		}
		src, dst, frame = e.sends(e.fromContainer, tcp(ipA, HairpinIPv4, 8080, 40000, "SA"), want)
		if src != ap(svcIP, 80) || dst != ap(ipA, 40000) || !bytes.Equal(frame[0:6], macA) {
			t.Fatalf("reply %v -> %v (MAC %x), want %v -> %v", src, dst, frame[0:6], ap(svcIP, 80), ap(ipA, 40000))
		}
		if _, dst, _ := e.sends(e.fromContainer, toFront(ipA, 40000, tcpFront, "A"), want); dst != ap(ipA, 8080) {
			t.Fatalf("established packet sent to %v", dst)
		}
	}
	runProgCases(t, []progCase{
		// Proves the hairpin source translation and its reverse.
		{"a pod reaches itself through its service", envOpts{}, func(t *testing.T, e *env) {
			hairpin(t, e, actRedirect)
		}},
		// Proves that loopback is not judged: A's policy allows nothing
		// either way, yet A reaches itself (and only itself).
		{"a hairpin is loopback, which policy does not judge", envOpts{policyIngress: true, policyEgress: true}, func(t *testing.T, e *env) {
			hairpin(t, e, actRedirect)
			e.denied(e.fromContainer, tcp(ipA, ipB, 40001, 8080, "S"), spec.DropPolicy)
		}},
		// The stack has no route back for the hairpin address.
		{"legacy routing: hairpin packets skip the stack", envOpts{legacyRouting: true}, func(t *testing.T, e *env) {
			hairpin(t, e, actRedirect)
		}},
		{"netkit: the pod's to-container translates the hairpin reply", envOpts{netkit: true}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beA)
			_, _, frame := e.sends(e.fromContainer, toFront(ipA, 40000, tcpFront, "S"), actRedirect)
			e.expect(e.toContainer, frame, actOK)
			reply := tcp(ipA, HairpinIPv4, 8080, 40000, "SA")
			if _, dst, _ := e.sends(e.fromContainer, reply, actRedirect); dst.Addr() != HairpinIPv4 {
				t.Fatalf("from-container translated the reply to %v; to-container must", dst)
			}
			reply.srcMAC, reply.dstMAC = hostMacA, macA
			if src, dst, _ := e.sends(e.toContainer, reply, actOK); src != ap(svcIP, 80) || dst != ap(ipA, 40000) {
				t.Fatalf("reply %v -> %v, want %v -> %v", src, dst, ap(svcIP, 80), ap(ipA, 40000))
			}
		}},
		{"an ICMP error of a hairpin flow is translated whole", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeA)
			e.sends(e.fromContainer, toFront(ipA, 5000, udpFront, ""), actRedirect)
			unreach := unreachable(t, ipA, HairpinIPv4, udp(HairpinIPv4, ipA, 5000, 5353))
			src, dst, frame := e.sends(e.fromContainer, unreach, actRedirect)
			qs, qd := quotedTuple(t, frame)
			if src.Addr() != svcIP || dst.Addr() != ipA || qs != ap(ipA, 5000) || qd != ap(svcIP, 53) {
				t.Fatalf("error %v -> %v quoting %v -> %v, want %v -> %v quoting %v -> %v",
					src.Addr(), dst.Addr(), qs, qd, svcIP, ipA, ap(ipA, 5000), ap(svcIP, 53))
			}
		}},
	})
}

func (e *env) setAffinity(client spec.Backend, f spec.Frontend, backend spec.BackendID, age time.Duration) {
	e.t.Helper()
	now, err := Monotonic()
	must(e.t, err)
	k := lxcLbAffinityKey{Client: uint64(be32(client.Address)), RevNatIndex: revNATOf(f)}
	v := lxcLbAffinityValue{LastUsed: uint64(now - age), BackendId: uint32(backend)}
	must(e.t, e.maps.LBAffinity.Put(&k, &v))
}

// Session affinity by client address.
func TestPrivilegedProgServiceAffinity(t *testing.T) {
	runProgCases(t, []progCase{
		// Proves that lb4_select's affinity is used, per client: without
		// it 16 connections over two backends all land on one with
		// probability 2^-15, and B would not keep its own backend.
		{"a client's new connections stay with its backend", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, spec.LBAffinity, beC, beD)
			first := e.backendFor(40000, tcpFront)
			for i := 1; i <= 16; i++ {
				if got := e.backendFor(uint16(40000+i), tcpFront); got != first {
					t.Fatalf("connection %d went to %v, the client's first to %v", i, got, first)
				}
			}
			other := beD
			if first == ipD {
				other = beC
			}
			// B chose the other backend earlier: it keeps it, A keeps its own.
			e.setAffinity(spec.Backend{Address: ipB}, tcpFront, other.ID, 0)
			b := e.loadB(false)
			_, dst, _ := e.sends(b.FromContainer, fromB(toFront(ipB, 40000, tcpFront, "S")), actRedirect)
			if dst.Addr() != other.Address || e.backendFor(40100, tcpFront) != first {
				t.Fatalf("B went to %v, want %v; A must stay with %v", dst, other.Address, first)
			}
			// A terminating backend takes no new client of affinity.
			chosen := beC
			if first == ipD {
				chosen = beD
			}
			chosen.Terminating = true
			must(t, e.maps.UpsertBackend(chosen))
			e.serve(tcpFront, spec.LBAffinity, other)
			if got := e.backendFor(40200, tcpFront); got != other.Address {
				t.Fatalf("with %v terminating a new connection went to %v", first, got)
			}
		}},
		// Proves the timeout: the entry names D, which is in no slot, so
		// only the affinity entry can send A there.
		{"affinity lasts as long as its timeout", envOpts{}, func(t *testing.T, e *env) {
			must(t, e.maps.UpsertBackend(beD))
			e.serve(tcpFront, spec.LBAffinity, beC)
			e.setAffinity(spec.Backend{Address: ipA}, tcpFront, beD.ID, 30*time.Second)
			if got := e.backendFor(40000, tcpFront); got != ipD {
				t.Fatalf("within the timeout A went to %v, want its affinity %v", got, ipD)
			}
			e.setAffinity(spec.Backend{Address: ipA}, tcpFront, beD.ID, 61*time.Second)
			if got := e.backendFor(40001, tcpFront); got != ipC {
				t.Fatalf("after the timeout A went to %v, want a new pick %v", got, ipC)
			}
		}},
		{"a deleted backend loses its affinity", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, spec.LBAffinity, beC)
			e.backendFor(40000, tcpFront)
			e.serve(tcpFront, spec.LBAffinity, beD)
			must(t, e.maps.DeleteBackend(beC.ID))
			if got := e.backendFor(40001, tcpFront); got != ipD {
				t.Fatalf("A went to %v, want %v", got, ipD)
			}
		}},
	})
}

// A terminating backend, out of the slots, keeps its connections.
func TestPrivilegedProgServiceTerminating(t *testing.T) {
	runProgCases(t, []progCase{
		// Proves the service entry's backend outlives its slot: a fresh
		// pick would send the old flow to D.
		{"a terminating backend keeps its flow but gets no new one", envOpts{}, func(t *testing.T, e *env) {
			e.serve(udpFront, 0, udpBeC)
			if got := e.backendFor(5000, udpFront); got != ipC {
				t.Fatalf("first flow went to %v", got)
			}
			terminating := udpBeC
			terminating.Terminating = true
			must(t, e.maps.UpsertBackend(terminating))
			e.serve(udpFront, 0, udpBeD)
			if got := e.backendFor(5000, udpFront); got != ipC {
				t.Fatalf("the old flow moved to %v", got)
			}
			if src, _, _ := e.sends(e.fromNetdev, udp(ipC, ipA, 5353, 5000), actRedirect); src != ap(svcIP, 53) {
				t.Fatalf("the old flow's reply came from %v", src)
			}
			if got := e.backendFor(5001, udpFront); got != ipD {
				t.Fatalf("a new flow went to %v, want %v", got, ipD)
			}
			// Deleted, the backend is gone: the flow moves on.
			must(t, e.maps.DeleteBackend(udpBeC.ID))
			if got := e.backendFor(5000, udpFront); got != ipD {
				t.Fatalf("with its backend deleted the flow went to %v", got)
			}
		}},
		{"a TCP connection cannot move to another backend", envOpts{}, func(t *testing.T, e *env) {
			e.serve(tcpFront, 0, beC)
			e.backendFor(40000, tcpFront)
			e.serve(tcpFront, 0, beD)
			must(t, e.maps.DeleteBackend(beC.ID))
			e.denied(e.fromContainer, toFront(ipA, 40000, tcpFront, "A"), spec.DropUnknownCT)
		}},
	})
}
