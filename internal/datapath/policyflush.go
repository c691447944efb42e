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
	return policyJudgement(entries, dir, remote, cidr, proto, port).allowed
}

// policyJudgement is PolicyAllows with the proxy an allow sends the
// connection to: any matching allow with a proxy port does, as in the
// datapath.
func policyJudgement(entries []spec.PolicyEntry, dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) judgement {
	var j judgement
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
			return judgement{}
		}
		j.allowed = true
		j.proxyPort = max(j.proxyPort, e.ProxyPort)
	}
	return j
}

// ICMP types that start the ICMP connections conntrack keeps.
const (
	icmpEchoReply = 0
	icmpEcho      = 8
)

// judgement is what policy says of a new connection's first packet:
// allowed or not, and the proxy an allow sends it to (0: none).
type judgement struct {
	allowed   bool
	proxyPort uint16
}

// policyJudge judges a new connection's first packet: direction, remote
// identity, its CIDR identity (0 for none), protocol and port (the ICMP
// type for ICMP).
type policyJudge func(dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) judgement

// judgeConn judges the connection k the way its first packet was judged.
func judgeConn(allows policyJudge, dir spec.Direction, remote, cidr identity.NumericIdentity, k CTKey) judgement {
	if k.Protocol != spec.ProtoICMP {
		return allows(dir, remote, cidr, k.Protocol, htons(k.Dport))
	}
	// An echo request names its id as the source port, an echo reply (one
	// that found no connection started one) as the destination port. With
	// id 0 the key cannot tell them apart: either type disallowed is enough.
	request := allows(dir, remote, cidr, spec.ProtoICMP, icmpEcho)
	reply := allows(dir, remote, cidr, spec.ProtoICMP, icmpEchoReply)
	switch {
	case k.Sport != 0:
		return request
	case k.Dport != 0:
		return reply
	}
	return judgement{allowed: request.allowed && reply.allowed}
}

// forgetDisallowed deletes the conntrack entries of connections that
// the endpoints' judges no longer allow, in the directions each endpoint
// enforces, in one walk of the table whatever the number of endpoints.
// Conntrack answers for established connections without asking policy
// again; without this, a removed allow would leave a connection open for
// hours (UDP: as long as it is busy).
func (m *Maps) forgetDisallowed(judges map[uint16]policyJudge) error {
	eps, err := m.EndpointEntries()
	if err != nil {
		return err
	}
	type enforced struct {
		allows          policyJudge
		ingress, egress bool
	}
	byAddr := map[uint32]enforced{}
	for _, e := range eps {
		if j, ok := judges[e.ID]; ok && e.IPv4.Is4() && (e.PolicyIngress || e.PolicyEgress) {
			byAddr[be32(e.IPv4)] = enforced{memoized(j), e.PolicyIngress, e.PolicyEgress}
		}
	}
	if len(byAddr) == 0 {
		return nil
	}
	cidrs := cidrIdentities{m: m, of: map[uint32]identity.NumericIdentity{}}
	var stale []CTKey
	err = m.walkConntrack(func(k *CTKey, v *CTEntry) {
		// A service entry only names a backend; policy judged the
		// connection's own entry, the translated tuple.
		if k.Flags&ctKeyService != 0 {
			return
		}
		// A connection the proxy serves stays only while policy, in a
		// direction that judges it, sends it to the same proxy:
		// otherwise its packets would keep going to a proxy whose rules
		// no longer apply (a UDP tuple reused by a new query would stay
		// redirected for as long as the entry lives). One that goes
		// straight goes when policy now sends it to a proxy: its next
		// packet is judged anew and goes there (a TCP connection the
		// proxy never saw is reset by it, and the client reconnects
		// through it), so that layer-7 rules are never bypassed by a
		// connection opened before them. Cilium keeps such a connection
		// straight. The proxy's own connection upstream is judged as
		// the client's through the proxy, and stays while allowed.
		allowed, redirected, wantsProxy := true, false, false
		judge := func(allows policyJudge, dir spec.Direction, remote identity.NumericIdentity, addr uint32) {
			j := judgeConn(allows, dir, remote, cidrs.lookup(addr), *k)
			allowed = allowed && j.allowed
			redirected = redirected || j.proxyPort == v.ProxyPort
			wantsProxy = wantsProxy || j.proxyPort != 0
		}
		if src, ok := byAddr[k.Saddr]; ok && src.egress {
			judge(src.allows, spec.Egress, identity.NumericIdentity(v.DstIdentity), k.Daddr)
		}
		if dst, ok := byAddr[k.Daddr]; ok && dst.ingress {
			judge(dst.allows, spec.Ingress, identity.NumericIdentity(v.SrcIdentity), k.Saddr)
		}
		toProxy, upstream := v.Flags&ctFlagToProxy != 0, v.Flags&ctFlagProxyUpstream != 0
		if !allowed || toProxy && !redirected || !toProxy && !upstream && wantsProxy {
			stale = append(stale, *k)
		}
	})
	if err != nil {
		return err
	}
	for _, k := range stale {
		if err := m.CT4.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete conntrack entry: %w", err)
		}
	}
	return nil
}

// memoized answers each question once: a table of tens of thousands of
// connections asks about few distinct peers and ports, and each answer
// costs map lookups.
func memoized(allows policyJudge) policyJudge {
	type question struct {
		dir          spec.Direction
		remote, cidr identity.NumericIdentity
		proto        uint8
		port         uint16
	}
	answers := map[question]judgement{}
	return func(dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) judgement {
		q := question{dir, remote, cidr, proto, port}
		a, ok := answers[q]
		if !ok {
			a = allows(dir, remote, cidr, proto, port)
			answers[q] = a
		}
		return a
	}
}

// cidrIdentities reads peers' CIDR identities from the ipcache, as the
// datapath judged their connections' first packets, each address once.
type cidrIdentities struct {
	m  *Maps
	of map[uint32]identity.NumericIdentity
}

func (c cidrIdentities) lookup(addr uint32) identity.NumericIdentity {
	if id, ok := c.of[addr]; ok {
		return id
	}
	var id identity.NumericIdentity
	if k, err := ipcacheKey(netip.PrefixFrom(addrOfBE32(addr), 32)); err == nil {
		var v IPCacheInfo
		if err := c.m.IPCache.Lookup(&k, &v); err == nil {
			id = identity.NumericIdentity(v.CidrIdentity)
		}
	}
	c.of[addr] = id
	return id
}
