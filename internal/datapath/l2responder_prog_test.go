package datapath

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
)

// BPF_PROG_RUN gives the packet the loopback device of the test's
// namespace: the device the responder entries name.
const runIfindex = 1

var (
	vip       = netip.MustParseAddr("192.168.1.240")
	askerMAC  = net.HardwareAddr{2, 0, 0, 0, 0, 9}
	askerIP   = netip.MustParseAddr("192.168.1.200")
	announcer = net.HardwareAddr{2, 0, 0, 0, 0, 0x42}
)

// arpAsk is an ARP packet from the asker about target: a request, or
// with op ARPReply an answer.
func arpAsk(t testing.TB, op uint16, sender, target netip.Addr) []byte {
	eth := &layers.Ethernet{SrcMAC: askerMAC, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP}
	arp := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6,
		ProtAddressSize: 4, Operation: op, SourceHwAddress: askerMAC, SourceProtAddress: sender.AsSlice(),
		DstHwAddress: make([]byte, 6), DstProtAddress: target.AsSlice()}
	return serialize(t, eth, arp)
}

func TestPrivilegedProgL2Responder(t *testing.T) {
	e := newEnv(t, envOpts{})
	must(t, e.maps.UpsertL2Responder(spec.L2Responder{Address: vip, Ifindex: runIfindex, MAC: announcer}))
	// Another address is announced on another device only.
	other := netip.MustParseAddr("192.168.1.241")
	must(t, e.maps.UpsertL2Responder(spec.L2Responder{Address: other, Ifindex: runIfindex + 1, MAC: announcer}))
	ask := arpAsk(t, layers.ARPRequest, askerIP, vip)
	unanswered := func(name string, frame []byte) {
		t.Helper()
		out := e.expect(e.fromNetdev, frame, actOK)
		if !bytes.Equal(out[:len(frame)], frame) {
			t.Fatalf("%s: the frame was changed: %x", name, out[:len(frame)])
		}
	}

	unanswered("agent never seen", ask)
	must(t, e.maps.BeatL2(time.Hour))

	out := e.expect(e.fromNetdev, ask, actRedirect)
	pkt := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	arp, _ := pkt.Layer(layers.LayerTypeARP).(*layers.ARP)
	if eth == nil || arp == nil {
		t.Fatalf("the reply is no ARP packet: %x", out)
	}
	if !bytes.Equal(eth.DstMAC, askerMAC) || !bytes.Equal(eth.SrcMAC, announcer) {
		t.Errorf("reply sent %s -> %s, want %s -> %s", eth.SrcMAC, eth.DstMAC, announcer, askerMAC)
	}
	if arp.Operation != layers.ARPReply ||
		!bytes.Equal(arp.SourceHwAddress, announcer) || !bytes.Equal(arp.SourceProtAddress, vip.AsSlice()) ||
		!bytes.Equal(arp.DstHwAddress, askerMAC) || !bytes.Equal(arp.DstProtAddress, askerIP.AsSlice()) {
		t.Errorf("reply op %d: %s is at %s, to %s at %s; want 2: %s is at %s, to %s at %s",
			arp.Operation, net.IP(arp.SourceProtAddress), net.HardwareAddr(arp.SourceHwAddress),
			net.IP(arp.DstProtAddress), net.HardwareAddr(arp.DstHwAddress), vip, announcer, askerIP, askerMAC)
	}
	entries, err := e.maps.L2Responders()
	must(t, err)
	for _, en := range entries {
		want := uint64(0)
		if en.Address == vip {
			want = 1
		}
		if en.Responses != want {
			t.Errorf("%s on %d: %d responses, want %d", en.Address, en.Ifindex, en.Responses, want)
		}
	}

	unanswered("an address not announced", arpAsk(t, layers.ARPRequest, askerIP, netip.MustParseAddr("192.168.1.250")))
	unanswered("an address announced on another device", arpAsk(t, layers.ARPRequest, askerIP, other))
	unanswered("a reply", arpAsk(t, layers.ARPReply, askerIP, vip))
	unanswered("a gratuitous request", arpAsk(t, layers.ARPRequest, vip, vip))

	// The agent stopped beating: its elections are lost by now, and
	// another node answers.
	must(t, e.maps.BeatL2(time.Nanosecond))
	time.Sleep(time.Millisecond)
	unanswered("agent gone", ask)
	must(t, e.maps.BeatL2(time.Hour))
	e.expect(e.fromNetdev, ask, actRedirect)

	must(t, e.maps.DeleteL2Responder(vip, runIfindex))
	unanswered("entry deleted", ask)
	must(t, e.maps.DeleteL2Responder(vip, runIfindex)) // gone already: no error
}

func TestGratuitousARPFrame(t *testing.T) {
	f := gratuitousARP(announcer, vip)
	pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	arp, _ := pkt.Layer(layers.LayerTypeARP).(*layers.ARP)
	if eth == nil || arp == nil || pkt.ErrorLayer() != nil {
		t.Fatalf("not an ARP frame: %x", f)
	}
	if !bytes.Equal(eth.DstMAC, layers.EthernetBroadcast) || !bytes.Equal(eth.SrcMAC, announcer) ||
		arp.Operation != layers.ARPRequest || !bytes.Equal(arp.SourceHwAddress, announcer) ||
		!bytes.Equal(arp.SourceProtAddress, vip.AsSlice()) || !bytes.Equal(arp.DstProtAddress, vip.AsSlice()) {
		t.Fatalf("gratuitous ARP %+v from %s to %s, want a broadcast request of %s at %s", arp, eth.SrcMAC, eth.DstMAC, vip, announcer)
	}
}

// SendGratuitousARP puts the announcement on the wire: what arrives at
// the other end of the device is the broadcast request of vip at its MAC.
func TestPrivilegedGratuitousARP(t *testing.T) {
	testenv.Privileged(t)
	freshNetNS(t)
	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "garp0", HardwareAddr: announcer}, PeerName: "garp1"}))
	a, err := netlink.LinkByName("garp0")
	must(t, err)
	b, err := netlink.LinkByName("garp1")
	must(t, err)
	must(t, netlink.LinkSetUp(a))
	must(t, netlink.LinkSetUp(b))

	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
	must(t, err)
	defer unix.Close(fd)
	must(t, unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: b.Attrs().Index}))
	must(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}))

	must(t, SendGratuitousARP("", uint32(a.Attrs().Index), announcer, vip))
	buf := make([]byte, 128)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	must(t, err)
	if got, want := buf[:n], gratuitousARP(announcer, vip); !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("received %x, want %x", got, want)
	}
}
