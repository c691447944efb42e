package datapath

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// PolicyAllows is what entries say about one packet of a new connection
// from or to a peer with identity remote (and, for an address in an
// ipBlock, its CIDR identity; 0 for none): a matching deny drops it, else
// a matching allow lets it through, else it is dropped. port is the
// destination port, or the ICMP type. This is the meaning that
// PolicyMapState encodes into longest-prefix-match keys.
func PolicyAllows(entries []spec.PolicyEntry, dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) bool {
	allowed := false
	for _, e := range entries {
		if e.Direction != dir {
			continue
		}
		if e.Identity != identity.Unknown && e.Identity != remote && (cidr == 0 || e.Identity != cidr) {
			continue
		}
		if e.Protocol != 0 && e.Protocol != proto {
			continue
		}
		if e.Port != 0 && (port < e.Port || port > max(e.Port, e.EndPort)) {
			continue
		}
		if e.Deny {
			return false
		}
		allowed = true
	}
	return allowed
}

// ICMP types that start the ICMP connections conntrack keeps.
const (
	icmpEchoReply = 0
	icmpEcho      = 8
)

// policyJudge says whether a new connection's first packet would be
// allowed: direction, remote identity, its CIDR identity (0 for none),
// protocol and port (the ICMP type for ICMP).
type policyJudge func(dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) bool

// disallowed reports whether allows no longer lets the connection k
// through, judged the way its first packet was.
func disallowed(allows policyJudge, dir spec.Direction, remote, cidr identity.NumericIdentity, k CTKey) bool {
	if k.Protocol != spec.ProtoICMP {
		return !allows(dir, remote, cidr, k.Protocol, htons(k.Dport))
	}
	// An echo request names its id as the source port, an echo reply (one
	// that found no connection started one) as the destination port. With
	// id 0 the key cannot tell them apart: either type disallowed is enough.
	request := allows(dir, remote, cidr, spec.ProtoICMP, icmpEcho)
	reply := allows(dir, remote, cidr, spec.ProtoICMP, icmpEchoReply)
	switch {
	case k.Sport != 0:
		return !request
	case k.Dport != 0:
		return !reply
	}
	return !request || !reply
}

// forgetDisallowed deletes the conntrack entries of the endpoint's
// connections that entries no longer allow, in the directions the
// endpoint enforces. Conntrack answers for established connections
// without asking policy again; without this, a removed allow would leave
// a connection open for hours (UDP: as long as it is busy).
func (m *Maps) forgetDisallowed(epID uint16, allows policyJudge) error {
	ep, ok, err := m.endpointByID(epID)
	if err != nil || !ok {
		return err
	}
	if !ep.PolicyIngress && !ep.PolicyEgress {
		return nil
	}
	addr := be32(ep.IPv4)
	cidrs := cidrIdentities{m: m}
	var stale []CTKey
	var k CTKey
	var v CTEntry
	it := m.CT4.Iterate()
	for it.Next(&k, &v) {
		// A service entry only names a backend; policy judged the
		// connection's own entry, the translated tuple.
		if k.Flags&ctKeyService != 0 {
			continue
		}
		switch {
		case k.Saddr == addr && ep.PolicyEgress &&
			disallowed(allows, spec.Egress, identity.NumericIdentity(v.DstIdentity), cidrs.of(k.Daddr), k),
			k.Daddr == addr && ep.PolicyIngress &&
				disallowed(allows, spec.Ingress, identity.NumericIdentity(v.SrcIdentity), cidrs.of(k.Saddr), k):
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterate conntrack: %w", err)
	}
	for _, k := range stale {
		if err := m.CT4.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete conntrack entry: %w", err)
		}
	}
	return nil
}

// endpointByID finds an endpoint's entry by its id.
func (m *Maps) endpointByID(id uint16) (EndpointEntry, bool, error) {
	eps, err := m.EndpointEntries()
	if err != nil {
		return EndpointEntry{}, false, err
	}
	for _, e := range eps {
		if e.ID == id && e.IPv4.Is4() {
			return e, true, nil
		}
	}
	return EndpointEntry{}, false, nil
}

// cidrIdentities reads peers' CIDR identities from the ipcache, as the
// datapath judged their connections' first packets.
type cidrIdentities struct{ m *Maps }

func (c cidrIdentities) of(addr uint32) identity.NumericIdentity {
	k, err := ipcacheKey(netip.PrefixFrom(addrOfBE32(addr), 32))
	if err != nil {
		return 0
	}
	var v IPCacheInfo
	if err := c.m.IPCache.Lookup(&k, &v); err != nil {
		return 0
	}
	return identity.NumericIdentity(v.CidrIdentity)
}
