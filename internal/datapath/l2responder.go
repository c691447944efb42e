package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// The L2 responder (bpf/lib/l2responder.h): the addresses this node
// answers ARP for, by device, and the agent's heartbeat without which it
// answers none.

// UpsertL2Responder makes the node answer ARP for r's address on r's
// device. Its reply count starts again.
func (m *Maps) UpsertL2Responder(r spec.L2Responder) error {
	if err := r.Validate(); err != nil {
		return err
	}
	k := lxcL2ResponderKey{Ip4: be32(r.Address), Ifindex: r.Ifindex}
	v := lxcL2ResponderEntry{Mac: [6]byte(r.MAC)}
	if err := m.L2Responder.Update(&k, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("l2 responder %s on %d: %w", r.Address, r.Ifindex, err)
	}
	return nil
}

// DeleteL2Responder stops the answers for addr on the device ifindex; one
// that is not there is no error.
func (m *Maps) DeleteL2Responder(addr netip.Addr, ifindex uint32) error {
	k := lxcL2ResponderKey{Ip4: be32(addr), Ifindex: ifindex}
	if err := m.L2Responder.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("l2 responder %s on %d: %w", addr, ifindex, err)
	}
	return nil
}

// L2Responders lists what the node answers ARP for.
func (m *Maps) L2Responders() ([]spec.L2ResponderEntry, error) {
	var (
		out []spec.L2ResponderEntry
		k   lxcL2ResponderKey
		v   lxcL2ResponderEntry
	)
	it := m.L2Responder.Iterate()
	for it.Next(&k, &v) {
		out = append(out, spec.L2ResponderEntry{
			L2Responder: spec.L2Responder{Address: addrOfBE32(k.Ip4), Ifindex: k.Ifindex, MAC: net.HardwareAddr(v.Mac[:])},
			Responses:   v.Responses,
		})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list l2 responders: %w", err)
	}
	return out, nil
}

// BeatL2 tells the datapath that the agent is alive now, and that its
// entries hold until maxAge passes without another beat.
func (m *Maps) BeatL2(maxAge time.Duration) error {
	now, err := Monotonic()
	if err != nil {
		return err
	}
	v := lxcL2Liveness{Seen: uint64(now), MaxAge: uint64(maxAge)}
	if err := m.L2Liveness.Update(uint32(0), &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("l2 liveness: %w", err)
	}
	return nil
}

// SendGratuitousARP broadcasts, on the device ifindex of the network
// namespace netns ("" for the caller's), that addr is at mac, so that the
// segment's ARP caches follow a takeover at once rather than when their
// entries go stale.
func SendGratuitousARP(netns string, ifindex uint32, mac net.HardwareAddr, addr netip.Addr) error {
	if !addr.Is4() || len(mac) != 6 {
		return fmt.Errorf("gratuitous ARP: %s at %s: want IPv4 and an Ethernet MAC", addr, mac)
	}
	frame := gratuitousARP(mac, addr)
	return netnamespace.Do(netns, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("gratuitous ARP: packet socket: %w", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: int(ifindex), Protocol: htons(unix.ETH_P_ARP), Halen: 6}
		copy(to.Addr[:], broadcastMAC)
		if err := unix.Sendto(fd, frame, 0, to); err != nil {
			return fmt.Errorf("gratuitous ARP for %s on %d: %w", addr, ifindex, err)
		}
		return nil
	})
}

var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// gratuitousARP is the Ethernet frame of an ARP request in which addr
// asks for itself from mac: every receiver that knows addr updates it.
func gratuitousARP(mac net.HardwareAddr, addr netip.Addr) []byte {
	ip := addr.As4()
	f := make([]byte, 0, 42)
	f = append(f, broadcastMAC...)
	f = append(f, mac...)
	f = binary.BigEndian.AppendUint16(f, unix.ETH_P_ARP)
	f = binary.BigEndian.AppendUint16(f, 1) // Ethernet
	f = binary.BigEndian.AppendUint16(f, unix.ETH_P_IP)
	f = append(f, 6, 4)
	f = binary.BigEndian.AppendUint16(f, 1) // request
	f = append(f, mac...)
	f = append(f, ip[:]...)
	f = append(f, make([]byte, 6)...)
	return append(f, ip[:]...)
}

// Devices are the devices the node's programs serve, where an L2
// announcement can answer: the uplink.
func (n *Node) Devices() ([]spec.Device, error) {
	h, err := n.netlinkHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(n.cfg.Uplink)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", n.cfg.Uplink, err)
	}
	a := l.Attrs()
	return []spec.Device{{Name: a.Name, Ifindex: uint32(a.Index), MAC: a.HardwareAddr}}, nil
}

// GratuitousARP announces r on its device of the node's namespace.
func (n *Node) GratuitousARP(r spec.L2Responder) error {
	return SendGratuitousARP(n.cfg.NetNS, r.Ifindex, r.MAC, r.Address)
}
