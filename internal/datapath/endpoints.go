package datapath

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/pkg/identity"
)

// EndpointEntry is what the datapath knows about a local endpoint.
type EndpointEntry struct {
	ID       uint16
	Identity identity.NumericIdentity
	IPv4     netip.Addr
	// MAC is the pod's own interface; HostMAC and HostIfindex belong to
	// the host-side veth that packets for the pod are redirected to.
	MAC           net.HardwareAddr
	HostMAC       net.HardwareAddr
	HostIfindex   int
	PolicyIngress bool
	PolicyEgress  bool
}

func (e EndpointEntry) info() EndpointInfo {
	v := EndpointInfo{Ifindex: uint32(e.HostIfindex), Identity: uint32(e.Identity), EpId: e.ID}
	if e.PolicyIngress {
		v.Flags |= epFlagIngressEnforce
	}
	if e.PolicyEgress {
		v.Flags |= epFlagEgressEnforce
	}
	copy(v.Mac[:], e.MAC)
	copy(v.NodeMac[:], e.HostMAC)
	return v
}

// UpsertEndpoint writes the endpoint's entry.
func (m *Maps) UpsertEndpoint(e EndpointEntry) error {
	k, err := endpointKey4(e.IPv4)
	if err != nil {
		return err
	}
	v := e.info()
	if err := m.Endpoints.Put(&k, &v); err != nil {
		return fmt.Errorf("put endpoint %s: %w", e.IPv4, err)
	}
	return nil
}

// DeleteEndpoint removes the endpoint's entry; a missing one is no error.
func (m *Maps) DeleteEndpoint(addr netip.Addr) error {
	k, err := endpointKey4(addr)
	if err != nil {
		return err
	}
	if err := m.Endpoints.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete endpoint %s: %w", addr, err)
	}
	return nil
}

func endpointKey4(a netip.Addr) (EndpointKey, error) {
	if !a.Is4() {
		return EndpointKey{}, fmt.Errorf("endpoint address %s: only IPv4 is supported", a)
	}
	k := EndpointKey{Family: afInet}
	a4 := a.As4()
	copy(k.Addr[:], a4[:])
	return k, nil
}

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
