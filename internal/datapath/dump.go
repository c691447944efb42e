package datapath

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Typed views of the maps, for restore after a restart and for the agent's
// debugging CLI. They read the kernel's state, not the desired one.

// EndpointEntries lists the endpoint map.
func (m *Maps) EndpointEntries() ([]EndpointEntry, error) {
	var out []EndpointEntry
	var k EndpointKey
	var v EndpointInfo
	it := m.Endpoints.Iterate()
	for it.Next(&k, &v) {
		if k.Family != afInet {
			continue
		}
		out = append(out, EndpointEntry{
			ID: v.EpId, Identity: identity.NumericIdentity(v.Identity), IPv4: netip.AddrFrom4([4]byte(k.Addr[:4])),
			// Copies: v is overwritten by the next entry.
			MAC: net.HardwareAddr(slices.Clone(v.Mac[:])), HostMAC: net.HardwareAddr(slices.Clone(v.NodeMac[:])),
			HostIfindex:   int(v.Ifindex),
			PolicyIngress: v.Flags&epFlagIngressEnforce != 0,
			PolicyEgress:  v.Flags&epFlagEgressEnforce != 0,
		})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate endpoints: %w", err)
	}
	return out, nil
}

// IPCacheEntries lists the ipcache.
func (m *Maps) IPCacheEntries() (map[netip.Prefix]spec.IPCacheEntry, error) {
	out := map[netip.Prefix]spec.IPCacheEntry{}
	var k IPCacheKey
	var v IPCacheInfo
	it := m.IPCache.Iterate()
	for it.Next(&k, &v) {
		e := spec.IPCacheEntry{Identity: identity.NumericIdentity(v.Identity)}
		if v.TunnelIpv4 != 0 {
			e.TunnelEndpoint = addrOfBE32(v.TunnelIpv4)
		}
		out[prefixOfIPCacheKey(k)] = e
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate ipcache: %w", err)
	}
	return out, nil
}

// PolicyState lists one endpoint's policy map entries.
func (m *Maps) PolicyState(epID uint16) (map[PolicyKey]PolicyValue, error) {
	out := map[PolicyKey]PolicyValue{}
	var k PolicyKey
	var v PolicyValue
	it := m.Policy.Iterate()
	for it.Next(&k, &v) {
		if k.EpId == epID {
			out[k] = v
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate policy: %w", err)
	}
	return out, nil
}

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
}

const (
	ctFlagSeenReply = 1
	ctFlagTxClosing = 2
	ctFlagRxClosing = 4
	ctFlagSNAT      = 8
	// Lookup hints of the datapath, not shown: the originator or the
	// responder has no local endpoint.
	ctFlagNoSrcEP = 16
	ctFlagNoDstEP = 32
)

// Connections lists the conntrack table.
func (m *Maps) Connections() ([]Connection, error) {
	var out []Connection
	var k CTKey
	var v CTEntry
	it := m.CT4.Iterate()
	for it.Next(&k, &v) {
		c := Connection{
			Src: addrOfBE32(k.Saddr), Dst: addrOfBE32(k.Daddr),
			SrcPort: htons(k.Sport), DstPort: htons(k.Dport), Protocol: k.Protocol,
			Expires: time.Duration(v.Expires), Packets: v.Packets, Bytes: v.Bytes,
			SrcIdentity: identity.NumericIdentity(v.SrcIdentity), DstIdentity: identity.NumericIdentity(v.DstIdentity),
			SeenReply:   v.Flags&ctFlagSeenReply != 0,
			Closing:     v.Flags&(ctFlagTxClosing|ctFlagRxClosing) != 0,
			Masqueraded: v.Flags&ctFlagSNAT != 0,
		}
		if v.TunnelIpv4 != 0 {
			c.Tunnel = addrOfBE32(v.TunnelIpv4)
		}
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate conntrack: %w", err)
	}
	return out, nil
}
