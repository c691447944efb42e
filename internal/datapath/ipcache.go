package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// UpsertIPCache writes one prefix.
func (m *Maps) UpsertIPCache(p netip.Prefix, e spec.IPCacheEntry) error {
	k, err := ipcacheKey(p)
	if err != nil {
		return err
	}
	v := ipcacheInfo(e)
	if err := m.IPCache.Put(&k, &v); err != nil {
		return fmt.Errorf("put ipcache %s: %w", p, markFull(err))
	}
	return nil
}

// DeleteIPCache removes one prefix; a missing one is no error.
func (m *Maps) DeleteIPCache(p netip.Prefix) error {
	k, err := ipcacheKey(p)
	if err != nil {
		return err
	}
	if err := m.IPCache.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete ipcache %s: %w", p, err)
	}
	return nil
}

// SyncIPCache makes the ipcache equal to desired: it writes what differs
// and prunes what is not desired. Running it twice changes nothing.
func (m *Maps) SyncIPCache(desired map[netip.Prefix]spec.IPCacheEntry) error {
	current := map[netip.Prefix]IPCacheInfo{}
	var k IPCacheKey
	var v IPCacheInfo
	it := m.IPCache.Iterate()
	for it.Next(&k, &v) {
		current[prefixOfIPCacheKey(k)] = v
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterate ipcache: %w", err)
	}
	var errs []error
	for p := range current {
		if _, ok := desired[p.Masked()]; !ok {
			errs = append(errs, m.DeleteIPCache(p))
		}
	}
	for p, e := range desired {
		want := ipcacheInfo(e)
		if cur, ok := current[p.Masked()]; ok && cur == want {
			continue
		}
		errs = append(errs, m.UpsertIPCache(p, e))
	}
	return errors.Join(errs...)
}

func ipcacheInfo(e spec.IPCacheEntry) IPCacheInfo {
	return IPCacheInfo{Identity: uint32(e.Identity), TunnelIpv4: be32(e.TunnelEndpoint), CidrIdentity: uint32(e.CIDRIdentity)}
}

func ipcacheKey(p netip.Prefix) (IPCacheKey, error) {
	if !p.Addr().Is4() {
		return IPCacheKey{}, fmt.Errorf("ipcache prefix %s: only IPv4 is supported", p)
	}
	p = p.Masked()
	k := IPCacheKey{Prefixlen: 32 + uint32(p.Bits()), Family: afInet}
	a4 := p.Addr().As4()
	copy(k.Addr[:], a4[:])
	return k, nil
}

func prefixOfIPCacheKey(k IPCacheKey) netip.Prefix {
	var a [4]byte
	copy(a[:], k.Addr[:4])
	return netip.PrefixFrom(netip.AddrFrom4(a), int(k.Prefixlen)-32)
}

// IPCacheEntries lists the ipcache.
func (m *Maps) IPCacheEntries() (map[netip.Prefix]spec.IPCacheEntry, error) {
	return ipcacheEntries(m.IPCache)
}

func ipcacheEntries(m *ebpf.Map) (map[netip.Prefix]spec.IPCacheEntry, error) {
	out := map[netip.Prefix]spec.IPCacheEntry{}
	var k IPCacheKey
	var v IPCacheInfo
	it := m.Iterate()
	for it.Next(&k, &v) {
		e := spec.IPCacheEntry{Identity: identity.NumericIdentity(v.Identity), CIDRIdentity: identity.NumericIdentity(v.CidrIdentity)}
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

// IPCacheReader looks addresses up in a node's pinned ipcache, as the
// datapath does: what another process on the node (the layer-7 proxy)
// needs to name a peer's identity.
type IPCacheReader struct{ m *ebpf.Map }

// OpenIPCache opens the ipcache pinned in the node's maps directory
// (<bpf-root>/maps), read-only.
func OpenIPCache(pinDir string) (*IPCacheReader, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, "cilium_ipcache"), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("open the pinned ipcache: %w", err)
	}
	return &IPCacheReader{m: m}, nil
}

// IdentityOf is the identity of the longest prefix that holds a, the
// world's when none does.
func (r *IPCacheReader) IdentityOf(a netip.Addr) identity.NumericIdentity {
	k, err := ipcacheKey(netip.PrefixFrom(a, a.BitLen()))
	if err != nil {
		return identity.World
	}
	var v IPCacheInfo
	if err := r.m.Lookup(&k, &v); err != nil {
		return identity.World
	}
	return identity.NumericIdentity(v.Identity)
}

// LocalIdentities are the prefixes whose identity is of the node's own
// scope (CIDR identities, LocalIdentityFlag), with it: what an agent that
// restarts gives the same prefixes again, so that connections judged by
// them go on.
func (r *IPCacheReader) LocalIdentities() (map[netip.Prefix]identity.NumericIdentity, error) {
	entries, err := ipcacheEntries(r.m)
	if err != nil {
		return nil, err
	}
	out := map[netip.Prefix]identity.NumericIdentity{}
	for p, e := range entries {
		if e.Identity&identity.LocalIdentityFlag != 0 {
			out[p] = e.Identity
		}
	}
	return out, nil
}

// Close releases the map.
func (r *IPCacheReader) Close() error { return r.m.Close() }
