package datapath

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// decoded parses a frame the program left and fails unless every checksum
// in it is right: re-serializing with fresh checksums must not change it.
func decoded(t testing.TB, frame []byte) (*layers.IPv4, gopacket.Packet) {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip == nil {
		t.Fatalf("no IPv4 in %x", frame)
	}
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ls := []gopacket.SerializableLayer{eth, ip}
	switch l := p.Layer(ip.NextLayerType()).(type) {
	case *layers.TCP:
		must(t, l.SetNetworkLayerForChecksum(ip))
		ls = append(ls, l, gopacket.Payload(l.LayerPayload()))
	case *layers.UDP:
		must(t, l.SetNetworkLayerForChecksum(ip))
		ls = append(ls, l, gopacket.Payload(l.LayerPayload()))
	case *layers.ICMPv4:
		ls = append(ls, l, gopacket.Payload(l.LayerPayload()))
	default:
		t.Fatalf("no transport layer in %x", frame)
	}
	buf := gopacket.NewSerializeBuffer()
	must(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ls...))
	if !bytes.Equal(buf.Bytes(), frame) {
		t.Fatalf("checksums wrong:\n got %x\nwant %x", frame, buf.Bytes())
	}
	return ip, p
}

func ports(p gopacket.Packet) (uint16, uint16) {
	switch l := p.TransportLayer().(type) {
	case *layers.TCP:
		return uint16(l.SrcPort), uint16(l.DstPort)
	case *layers.UDP:
		return uint16(l.SrcPort), uint16(l.DstPort)
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
		return ic.Id, ic.Id
	}
	return 0, 0
}

// masqueraded sends out through from-container and returns the source
// port the world sees.
func (e *env) masqueraded(out pkt) uint16 {
	e.t.Helper()
	frame := e.expect(e.fromContainer, out.frame(e.t), actRedirect)
	ip, p := decoded(e.t, frame)
	sport, _ := ports(p)
	if !ip.SrcIP.Equal(nodeIP.AsSlice()) || !ip.DstIP.Equal(out.dst.AsSlice()) {
		e.t.Fatalf("translated to %v -> %v, want %v -> %v", ip.SrcIP, ip.DstIP, nodeIP, out.dst)
	}
	if want := MasqueradePortRange(DefaultEphemeralPorts, DefaultNodePorts); !want.Contains(sport) {
		e.t.Fatalf("masquerade port %d outside %v", sport, want)
	}
	return sport
}

// translatedBack sends the reply in through from-netdev and checks that
// it reaches pod A with its original port.
func (e *env) translatedBack(reply pkt, wantPort uint16) {
	e.t.Helper()
	frame := e.expect(e.fromNetdev, reply.frame(e.t), actRedirect)
	ip, p := decoded(e.t, frame)
	_, dport := ports(p)
	if !ip.DstIP.Equal(ipA.AsSlice()) || dport != wantPort || !bytes.Equal(frame[0:6], macA) {
		e.t.Fatalf("reply to %v port %d (MAC %x), want %v port %d", ip.DstIP, dport, frame[0:6], ipA, wantPort)
	}
}

func TestPrivilegedProgMasquerade(t *testing.T) {
	masq := envOpts{masquerade: true}
	runProgCases(t, []progCase{
		{"TCP to the world leaves with the node's address and comes back", masq, func(t *testing.T, e *env) {
			port := e.masqueraded(tcp(ipA, ipWorld, 40000, 443, "S"))
			if again := e.masqueraded(tcp(ipA, ipWorld, 40000, 443, "A")); again != port {
				t.Fatalf("second packet got port %d, first %d", again, port)
			}
			e.translatedBack(tcp(ipWorld, nodeIP, 443, port, "SA"), 40000)
		}},
		{"UDP to the world is masqueraded", masq, func(t *testing.T, e *env) {
			port := e.masqueraded(udp(ipA, ipWorld, 5353, 53))
			e.translatedBack(udp(ipWorld, nodeIP, 53, port), 5353)
		}},
		{"ICMP echo is masqueraded by its id", masq, func(t *testing.T, e *env) {
			id := e.masqueraded(echo(ipA, ipWorld, 77, false))
			reply := echo(ipWorld, nodeIP, id, true)
			frame := e.expect(e.fromNetdev, reply.frame(t), actRedirect)
			ip, p := decoded(t, frame)
			if gotID, _ := ports(p); !ip.DstIP.Equal(ipA.AsSlice()) || gotID != 77 {
				t.Fatalf("echo reply to %v id %d, want %v id 77", ip.DstIP, gotID, ipA)
			}
		}},
		{"ICMP errors about masqueraded packets reach the pod", masq, func(t *testing.T, e *env) {
			port := e.masqueraded(tcp(ipA, ipWorld, 40000, 443, "S"))
			translated := tcp(nodeIP, ipWorld, port, 443, "S")
			fragNeeded := unreachable(t, ipWorld, nodeIP, translated)
			fragNeeded.icmpCode = 4
			frame := e.expect(e.fromNetdev, fragNeeded.frame(t), actRedirect)
			ip, p := decoded(t, frame)
			quoted := gopacket.NewPacket(p.Layer(layers.LayerTypeICMPv4).LayerPayload(), layers.LayerTypeIPv4, gopacket.Default)
			qip, _ := quoted.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if !ip.DstIP.Equal(ipA.AsSlice()) || qip == nil || !qip.SrcIP.Equal(ipA.AsSlice()) {
				t.Fatalf("error to %v quoting %v, want both %v", ip.DstIP, qip, ipA)
			}
			raw := p.Layer(layers.LayerTypeICMPv4).LayerPayload()
			if sport := binary.BigEndian.Uint16(raw[qip.IHL*4:]); sport != 40000 {
				t.Fatalf("quoted source port %d, want 40000", sport)
			}
			check := qip.Checksum
			buf := gopacket.NewSerializeBuffer()
			must(t, qip.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: true}))
			if qip.Checksum != check {
				t.Fatalf("quoted header checksum %#x, want %#x", check, qip.Checksum)
			}
		}},
		{"ICMP errors about unknown flows stay with the node", masq, func(t *testing.T, e *env) {
			stray := unreachable(t, ipWorld, nodeIP, tcp(nodeIP, ipWorld, 33333, 443, "S"))
			e.expect(e.fromNetdev, stray.frame(t), actOK)
		}},
		{"two pods with the same port get different masquerade ports", masq, func(t *testing.T, e *env) {
			p1 := e.masqueraded(tcp(ipA, ipWorld, 40000, 443, "S"))
			p2 := e.masqueraded(tcp(ipA, ipWorld, 40001, 443, "S"))
			if p1 == p2 {
				t.Fatalf("both flows got port %d", p1)
			}
		}},
		{"cluster destinations keep the pod's address", masq, func(t *testing.T, e *env) {
			frame := e.expect(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S").frame(t), actRedirect)
			if ip, _ := decoded(t, frame); !ip.SrcIP.Equal(ipA.AsSlice()) {
				t.Fatalf("source %v, want %v", ip.SrcIP, ipA)
			}
		}},
		{"without masquerading the pod's address leaves", envOpts{}, func(t *testing.T, e *env) {
			frame := e.expect(e.fromContainer, tcp(ipA, ipWorld, 40000, 443, "S").frame(t), actRedirect)
			if ip, _ := decoded(t, frame); !ip.SrcIP.Equal(ipA.AsSlice()) {
				t.Fatalf("source %v, want %v", ip.SrcIP, ipA)
			}
		}},
		{"traffic to the node without a mapping is left to the stack", masq, func(t *testing.T, e *env) {
			in := tcp(ipWorld, nodeIP, 443, 40000, "SA").frame(t)
			if out := e.expect(e.fromNetdev, in, actOK); !bytes.Equal(out, in) {
				t.Fatal("packet changed")
			}
		}},
		{"later fragments to the world cannot be masqueraded", masq, func(t *testing.T, e *env) {
			first := udp(ipA, ipWorld, 5353, 53)
			first.ipID, first.moreFrags = 7, true
			e.expect(e.fromContainer, first.frame(t), actRedirect)
			later := udp(ipA, ipWorld, 0, 0)
			later.ipID, later.fragOffset = 7, 4
			e.denied(e.fromContainer, later, spec.DropFragNoSupport)
		}},
	})
}
