package datapath

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// pkt describes a crafted frame; zero fields take sensible defaults.
type pkt struct {
	src, dst     netip.Addr
	proto        layers.IPProtocol
	sport, dport uint16
	flags        string // TCP flags: any of "SAFRP"
	icmpType     uint8
	icmpCode     uint8
	icmpID       uint16
	ipID         uint16
	ttl          uint8  // 64 when 0
	ipOptions    bool   // a router-alert option: a 24-byte header
	fragOffset   uint16 // in 8-byte units
	moreFrags    bool
	quote        []byte // ICMP error payload: the quoted packet
	srcMAC       net.HardwareAddr
	dstMAC       net.HardwareAddr
	payload      []byte
}

func tcp(src, dst netip.Addr, sport, dport uint16, flags string) pkt {
	return pkt{src: src, dst: dst, proto: layers.IPProtocolTCP, sport: sport, dport: dport, flags: flags}
}

func udp(src, dst netip.Addr, sport, dport uint16) pkt {
	return pkt{src: src, dst: dst, proto: layers.IPProtocolUDP, sport: sport, dport: dport}
}

func sctp(src, dst netip.Addr, sport, dport uint16) pkt {
	return pkt{src: src, dst: dst, proto: layers.IPProtocolSCTP, sport: sport, dport: dport}
}

func echo(src, dst netip.Addr, id uint16, reply bool) pkt {
	p := pkt{src: src, dst: dst, proto: layers.IPProtocolICMPv4, icmpType: layers.ICMPv4TypeEchoRequest, icmpID: id}
	if reply {
		p.icmpType = layers.ICMPv4TypeEchoReply
	}
	return p
}

// unreachable is the ICMP port-unreachable error from src about quoted.
func unreachable(t testing.TB, src, dst netip.Addr, quoted pkt) pkt {
	ip := quoted.ipBytes(t)
	ihl := int(ip[0]&0x0f) * 4
	return pkt{src: src, dst: dst, proto: layers.IPProtocolICMPv4,
		icmpType: layers.ICMPv4TypeDestinationUnreachable, icmpCode: 3, quote: ip[:ihl+8]}
}

func (p pkt) layers(t testing.TB) []gopacket.SerializableLayer {
	t.Helper()
	ttl := p.ttl
	if ttl == 0 {
		ttl = 64
	}
	ip := &layers.IPv4{
		Version: 4, TTL: ttl, Protocol: p.proto, Id: p.ipID, FragOffset: p.fragOffset,
		SrcIP: p.src.AsSlice(), DstIP: p.dst.AsSlice(),
	}
	if p.moreFrags {
		ip.Flags = layers.IPv4MoreFragments
	}
	if p.ipOptions {
		ip.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
	}
	payload := p.payload
	if payload == nil {
		payload = []byte("cilium-go")
	}
	if p.fragOffset > 0 {
		return []gopacket.SerializableLayer{ip, gopacket.Payload(payload)}
	}
	switch p.proto {
	case layers.IPProtocolTCP:
		l := &layers.TCP{SrcPort: layers.TCPPort(p.sport), DstPort: layers.TCPPort(p.dport), Window: 1024}
		for _, f := range p.flags {
			switch f {
			case 'S':
				l.SYN = true
			case 'A':
				l.ACK = true
			case 'F':
				l.FIN = true
			case 'R':
				l.RST = true
			case 'P':
				l.PSH = true
			}
		}
		must(t, l.SetNetworkLayerForChecksum(ip))
		return []gopacket.SerializableLayer{ip, l, gopacket.Payload(payload)}
	case layers.IPProtocolUDP:
		l := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		must(t, l.SetNetworkLayerForChecksum(ip))
		return []gopacket.SerializableLayer{ip, l, gopacket.Payload(payload)}
	case layers.IPProtocolSCTP:
		l := &layers.SCTP{SrcPort: layers.SCTPPort(p.sport), DstPort: layers.SCTPPort(p.dport)}
		return []gopacket.SerializableLayer{ip, l, gopacket.Payload(payload)}
	case layers.IPProtocolICMPv4:
		l := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(p.icmpType, p.icmpCode), Id: p.icmpID, Seq: 1}
		if p.quote != nil {
			payload = p.quote
		}
		return []gopacket.SerializableLayer{ip, l, gopacket.Payload(payload)}
	}
	return []gopacket.SerializableLayer{ip, gopacket.Payload(payload)}
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	must(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return buf.Bytes()
}

func (p pkt) ipBytes(t testing.TB) []byte {
	return serialize(t, p.layers(t)...)
}

// frame is the packet in an Ethernet frame, by default as pod A sends it
// to its gateway.
func (p pkt) frame(t testing.TB) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: p.srcMAC, DstMAC: p.dstMAC, EthernetType: layers.EthernetTypeIPv4}
	if eth.SrcMAC == nil {
		eth.SrcMAC = macA
	}
	if eth.DstMAC == nil {
		eth.DstMAC = hostMacA
	}
	return serialize(t, append([]gopacket.SerializableLayer{eth}, p.layers(t)...)...)
}

func arpFrame(t testing.TB) []byte {
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP}
	arp := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6,
		ProtAddressSize: 4, Operation: layers.ARPRequest, SourceHwAddress: macA, SourceProtAddress: ipA.AsSlice(),
		DstHwAddress: make([]byte, 6), DstProtAddress: nodeIP.AsSlice()}
	return serialize(t, eth, arp)
}

func ipv6Frame(t testing.TB) []byte {
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: hostMacA, EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolNoNextHeader,
		SrcIP: net.ParseIP("fd00::a"), DstIP: net.ParseIP("fd00::b")}
	return serialize(t, eth, ip)
}
