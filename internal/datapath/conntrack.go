package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Connection is one conntrack entry, named by its first packet.
type Connection struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16 // ICMP echo: the id as SrcPort
	Protocol         uint8
	// Expires is on the monotonic clock (see Monotonic).
	Expires                  time.Duration
	Packets, Bytes           uint64
	SrcIdentity, DstIdentity identity.NumericIdentity
	// Tunnel is the node behind the remote side, if tunnelled.
	Tunnel      netip.Addr
	SeenReply   bool
	Closing     bool
	Masqueraded bool
	// RevNATIndex names the service that translated the connection: its
	// replies leave with the frontend's address (0: none).
	RevNATIndex uint16
	// NorthSouth marks a connection from outside the node that an
	// external frontend (NodePort, ExternalIP, LoadBalancer, HostPort)
	// sent to a local backend: its replies are translated back as they
	// leave the backend.
	NorthSouth bool
	// Service marks a service entry: the client's tuple to a frontend,
	// which names the connection's backend (BackendID) and RevNATIndex.
	Service   bool
	BackendID spec.BackendID
	// Frontend is the node address of a NodePort at another node's that
	// translated the connection (spec.AnyNode's frontends): its replies
	// come from there.
	Frontend netip.Addr
}

const (
	ctFlagSeenReply = uint16(lxcCtFlagsCT_F_SEEN_REPLY)
	ctFlagTxClosing = uint16(lxcCtFlagsCT_F_TX_CLOSING)
	ctFlagRxClosing = uint16(lxcCtFlagsCT_F_RX_CLOSING)
	ctFlagSNAT      = uint16(lxcCtFlagsCT_F_SNAT)
	ctFlagNodePort  = uint16(lxcCtFlagsCT_F_NODEPORT)
	ctFlagToProxy   = uint16(lxcCtFlagsCT_F_TO_PROXY)
	// The proxy's own connection upstream, judged when it started as
	// the client's through the proxy.
	ctFlagProxyUpstream = uint16(lxcCtFlagsCT_F_PROXY_UPSTREAM)
	// Lookup hints of the datapath, not shown: the originator or the
	// responder has no local endpoint.
	ctFlagNoSrcEP = uint16(lxcCtFlagsCT_F_NO_SRC_EP)
	ctFlagNoDstEP = uint16(lxcCtFlagsCT_F_NO_DST_EP)

	ctKeyService = uint8(lxcCtKeyFlagsCT_KEY_SERVICE)
)

// ctBatch is how many conntrack entries a walk reads per system call.
const ctBatch = 4096

// walkConntrack calls fn on every conntrack entry, reading them in
// batches: a node's table holds up to 64Ki entries, and reading them one
// at a time (a next-key and a lookup call each) costs a core tenths of a
// second. Entries added or deleted meanwhile may or may not be seen.
func (m *Maps) walkConntrack(fn func(k *CTKey, v *CTEntry)) error {
	keys, vals := make([]CTKey, ctBatch), make([]CTEntry, ctBatch)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.CT4.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			fn(&keys[i], &vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read conntrack: %w", err)
		}
	}
}

// Connections lists the conntrack table.
func (m *Maps) Connections() ([]Connection, error) {
	var out []Connection
	err := m.walkConntrack(func(k *CTKey, v *CTEntry) {
		c := Connection{
			Src: addrOfBE32(k.Saddr), Dst: addrOfBE32(k.Daddr),
			SrcPort: htons(k.Sport), DstPort: htons(k.Dport), Protocol: k.Protocol,
			Expires: time.Duration(v.Expires), Packets: v.Packets, Bytes: v.Bytes,
			SrcIdentity: identity.NumericIdentity(v.SrcIdentity), DstIdentity: identity.NumericIdentity(v.DstIdentity),
			SeenReply:   v.Flags&ctFlagSeenReply != 0,
			Closing:     v.Flags&(ctFlagTxClosing|ctFlagRxClosing) != 0,
			Masqueraded: v.Flags&ctFlagSNAT != 0,
			RevNATIndex: v.RevNatIndex,
			NorthSouth:  v.Flags&ctFlagNodePort != 0,
			Service:     k.Flags&ctKeyService != 0,
		}
		// The field is the backend of a service entry, the frontend's
		// address of a connection (a union in C).
		if c.Service {
			c.BackendID = spec.BackendID(v.BackendId)
		} else if v.BackendId != 0 {
			c.Frontend = addrOfBE32(v.BackendId)
		}
		if v.TunnelIpv4 != 0 {
			c.Tunnel = addrOfBE32(v.TunnelIpv4)
		}
		out = append(out, c)
	})
	return out, err
}

// Monotonic is the clock conntrack lifetimes are measured on.
func Monotonic() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("read monotonic clock: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// CollectConntrack deletes the entries that expired before now (on the
// monotonic clock) and returns how many went.
func (m *Maps) CollectConntrack(now time.Duration) (int, error) {
	var stale []CTKey
	err := m.walkConntrack(func(k *CTKey, v *CTEntry) {
		if time.Duration(v.Expires) <= now {
			stale = append(stale, *k)
		}
	})
	if err != nil {
		return 0, err
	}
	return m.deleteExpired(stale, now)
}

// FlushConntrack deletes the conntrack entries whose source or
// destination address match takes (every entry with a nil match) and
// returns how many went, as cilium-dbg bpf ct flush does. The connections
// lose their state: their next packets are judged as new ones.
func (m *Maps) FlushConntrack(match func(netip.Addr) bool) (int, error) {
	var keys []CTKey
	err := m.walkConntrack(func(k *CTKey, _ *CTEntry) {
		if match == nil || match(addrOfBE32(k.Saddr)) || match(addrOfBE32(k.Daddr)) {
			keys = append(keys, *k)
		}
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range keys {
		err := m.CT4.Delete(&keys[i])
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("delete conntrack entry: %w", err)
		}
		n++
	}
	return n, nil
}

// deleteExpired deletes the entries of keys that are still expired. The
// walk that found them takes a while, and meanwhile a new connection may
// have taken an expired entry's tuple (a client's port comes round
// again): its fresh entry must stay, or its next segment, which starts
// no connection, is dropped. Reading each entry again right before its
// delete leaves a window of two system calls instead of the whole walk.
func (m *Maps) deleteExpired(keys []CTKey, now time.Duration) (int, error) {
	n := 0
	for i := range keys {
		var v CTEntry
		err := m.CT4.Lookup(&keys[i], &v)
		if errors.Is(err, ebpf.ErrKeyNotExist) || (err == nil && time.Duration(v.Expires) > now) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("lookup conntrack entry: %w", err)
		}
		err = m.CT4.Delete(&keys[i])
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, fmt.Errorf("delete conntrack entry: %w", err)
		}
		if err == nil {
			n++
		}
	}
	return n, nil
}
