package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// PolicyAllows is what entries say about one packet of a new connection:
// a matching deny drops it, else a matching allow lets it through, else
// it is dropped. port is the destination port, or the ICMP type. This is
// the meaning that PolicyMapState encodes into longest-prefix-match keys.
func PolicyAllows(entries []PolicyEntry, dir Direction, remote uint32, proto uint8, port uint16) bool {
	allowed := false
	for _, e := range entries {
		if e.Direction != dir || (e.Identity != IdentityAny && e.Identity != remote) {
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

// icmpEcho is the ICMP type that starts the only ICMP connections
// conntrack keeps: an echo request's.
const icmpEcho = 8

// forgetDisallowed deletes the conntrack entries of the endpoint's
// connections that entries no longer allow, in the directions the
// endpoint enforces. Conntrack answers for established connections
// without asking policy again; without this, a removed allow would leave
// a connection open for hours (UDP: as long as it is busy).
func (m *Maps) forgetDisallowed(epID uint16, entries []PolicyEntry) error {
	ep, ok, err := m.endpointByID(epID)
	if err != nil || !ok {
		return err
	}
	if !ep.PolicyIngress && !ep.PolicyEgress {
		return nil
	}
	addr := be32(ep.IPv4)
	var stale []CTKey
	var k CTKey
	var v CTEntry
	it := m.CT4.Iterate()
	for it.Next(&k, &v) {
		port := htons(k.Dport)
		if k.Protocol == protoICMP {
			port = icmpEcho
		}
		switch {
		case k.Saddr == addr && ep.PolicyEgress && !PolicyAllows(entries, Egress, v.DstIdentity, k.Protocol, port),
			k.Daddr == addr && ep.PolicyIngress && !PolicyAllows(entries, Ingress, v.SrcIdentity, k.Protocol, port):
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
