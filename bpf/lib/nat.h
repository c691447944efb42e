/* SPDX-License-Identifier: Apache-2.0 */
/* Source translation to the node's address: masquerading of pod traffic
 * to the world, and the flows from outside that a NodePort, ExternalIP or
 * LoadBalancer frontend sends to a backend on another node
 * (lib/nodeport.h), whose replies must come back through this node. One
 * LRU map holds both directions of every translation: the egress key is
 * the original tuple, the ingress key the reply as it arrives at the
 * node. Both kinds take their ports from one range and claim the reply's
 * key with BPF_NOEXIST, so that neither can take a tuple the other holds;
 * the entries of a NodePort flow carry its reverse NAT index. */
#pragma once

#include "common.h"
#include "packet.h"

/* The ports translation picks from. The agent sets a range disjoint from
 * the node's ip_local_port_range and from the NodePort range: the node's
 * own sockets take their ports there, so a translated flow never takes
 * the tuple of a node connection to the same remote, and a reply to a
 * translated flow never looks like a client of a NodePort. */
volatile const __u16 NAT_PORT_MIN = 1024;
volatile const __u16 NAT_PORT_MAX = 29999;
#define NAT_TRIES 16


struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct nat4_key);
	__type(value, struct nat4_entry);
	__uint(max_entries, 65536);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_snat4 SEC(".maps");

/* nat_port_off is where the translated port sits: the source port on the
 * way out, the destination port on the way back; ICMP echo uses its id. */
static __always_inline int nat_port_off(const struct pkt *p, int egress, __u32 *off, __u32 *csum_off,
					__u64 *csum_flags)
{
	switch (p->protocol) {
	case IPPROTO_TCP:
		*off = p->l4_off + (egress ? 0 : 2);
		*csum_off = p->l4_off + 16;
		*csum_flags = 0;
		return 0;
	case IPPROTO_UDP:
		*off = p->l4_off + (egress ? 0 : 2);
		*csum_off = p->l4_off + 6;
		*csum_flags = BPF_F_MARK_MANGLED_0;
		return 0;
	case IPPROTO_ICMP:
		if (p->icmp_type != ICMP_ECHO && p->icmp_type != ICMP_ECHOREPLY)
			return -1;
		*off = p->l4_off + 4;
		*csum_off = p->l4_off + 2;
		*csum_flags = 0;
		return 0;
	}
	return -1;
}

/* nat_rewrite replaces one address (source or destination) and the port
 * at port_off, fixing the IP and L4 checksums incrementally. */
static __always_inline int nat_rewrite(struct __sk_buff *skb, const struct pkt *p, int egress,
				       __u32 old_addr, __u32 new_addr, __u16 old_port, __u16 new_port)
{
	__u32 port_off, csum_off, addr_off = egress ? IP_SADDR_OFF : IP_DADDR_OFF;
	__u64 csum_flags;

	if (nat_port_off(p, egress, &port_off, &csum_off, &csum_flags) < 0)
		return -DROP_INVALID;
	if (p->protocol != IPPROTO_ICMP &&
	    bpf_l4_csum_replace(skb, csum_off, old_addr, new_addr, BPF_F_PSEUDO_HDR | csum_flags | 4) < 0)
		return -DROP_INVALID;
	if (bpf_l4_csum_replace(skb, csum_off, old_port, new_port, csum_flags | 2) < 0)
		return -DROP_INVALID;
	if (bpf_skb_store_bytes(skb, port_off, &new_port, 2, 0) < 0)
		return -DROP_INVALID;
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, old_addr, new_addr, 4) < 0)
		return -DROP_INVALID;
	if (bpf_skb_store_bytes(skb, addr_off, &new_addr, 4, 0) < 0)
		return -DROP_INVALID;
	return 0;
}

/* The port the pod used, as the tuple names it. */
static __always_inline __u16 nat_orig_port(const struct pkt *p)
{
	return p->sport;
}

/* snat_reply_held says whether the reply's entry rk still leads back to
 * the flow (rv), claiming it again when it went: the map is an LRU, which
 * may evict one entry of a flow and keep the other. 0: another flow
 * holds the tuple now, and the flow needs a new port. */
static __always_inline int snat_reply_held(struct nat4_key *rk, struct nat4_entry *rv)
{
	struct nat4_entry *cur = bpf_map_lookup_elem(&cilium_snat4, rk);

	if (cur)
		return cur->addr == rv->addr && cur->port == rv->port && cur->rev_nat_index == rv->rev_nat_index;
	return bpf_map_update_elem(&cilium_snat4, rk, rv, BPF_NOEXIST) == 0;
}

/* snat_egress_rev translates a packet's source to the node's address,
 * allocating a port for a new flow. rev_nat_index marks a NodePort flow
 * (0: masquerading); an existing flow keeps the mapping it has while its
 * reply's entry still leads back to it (snat_reply_held), else it gets a
 * new port: a flow whose replies could not be translated back would be
 * lost for as long as it lasts. */
static __always_inline int snat_egress_rev(struct __sk_buff *skb, struct pkt *p, __u16 rev_nat_index)
{
	struct nat4_key k = {
		.saddr = p->saddr, .daddr = p->daddr, .sport = p->sport,
		.dport = p->dport, .protocol = p->protocol, .dir = DIR_EGRESS,
		.rev_nat_index = rev_nat_index,
	};
	struct nat4_key rk = {
		.saddr = p->daddr, .daddr = NODE_IPV4, .dport = 0,
		.protocol = p->protocol, .dir = DIR_INGRESS,
	};
	struct nat4_entry rv = { .addr = p->saddr, .port = nat_orig_port(p), .rev_nat_index = rev_nat_index };
	struct nat4_entry fv = { .addr = NODE_IPV4, .rev_nat_index = rev_nat_index };
	struct nat4_entry *e;
	__u16 port = 0;
	int i, ret;

	if (p->later_frag)
		return -DROP_FRAG_NOSUPPORT;
	/* An echo reply names the id as its destination port. */
	if (p->protocol != IPPROTO_ICMP)
		rk.sport = p->dport;
	e = bpf_map_lookup_elem(&cilium_snat4, &k);
	if (e) {
		rk.dport = e->port;
		if (snat_reply_held(&rk, &rv))
			port = e->port;
	}
	if (!port) {
		for (i = 0; i < NAT_TRIES; i++) {
			rk.dport = bpf_htons(NAT_PORT_MIN + bpf_get_prandom_u32() % (NAT_PORT_MAX - NAT_PORT_MIN + 1));
			if (bpf_map_update_elem(&cilium_snat4, &rk, &rv, BPF_NOEXIST) == 0) {
				port = rk.dport;
				break;
			}
		}
		if (!port)
			return -DROP_NAT_NO_MAPPING;
		fv.port = port;
		if (bpf_map_update_elem(&cilium_snat4, &k, &fv, BPF_ANY) < 0)
			return -DROP_NAT_NO_MAPPING;
	}
	ret = nat_rewrite(skb, p, 1, p->saddr, NODE_IPV4, nat_orig_port(p), port);
	if (ret < 0)
		return ret;
	p->saddr = NODE_IPV4;
	p->sport = port;
	return 0;
}

/* snat_egress masquerades a pod's packet to the world. */
static __always_inline int snat_egress(struct __sk_buff *skb, struct pkt *p)
{
	return snat_egress_rev(skb, p, 0);
}

/* snat_icmp_error translates an ICMP error about a translated packet
 * back to its sender, so that path MTU discovery and unreachables reach
 * it: the outer destination and the quoted source address and port. Only
 * the quoted L4 checksum stays stale; receivers do not check it.
 * nodeport_only leaves masqueraded flows alone; *rev_nat is a NodePort
 * flow's reverse NAT index. */
static __always_inline int snat_icmp_error(struct __sk_buff *skb, struct pkt *p, int nodeport_only,
					   __u16 *rev_nat)
{
	__u32 inner = p->l4_off + sizeof(struct icmphdr), inner_l4, icmp_csum = p->l4_off + 2;
	struct nat4_key k = { .daddr = NODE_IPV4, .dir = DIR_INGRESS };
	struct nat4_entry *e;
	struct iphdr ip;
	__u16 ports[2], old_csum, new_csum, port_off;

	if (bpf_skb_load_bytes(skb, inner, &ip, sizeof(ip)) < 0 || ip.ihl < 5 || ip.saddr != NODE_IPV4)
		return 0;
	inner_l4 = inner + ip.ihl * 4;
	k.saddr = ip.daddr;
	k.protocol = ip.protocol;
	if (ip.protocol == IPPROTO_ICMP) {
		port_off = 4; /* the echo id */
		if (bpf_skb_load_bytes(skb, inner_l4 + port_off, &ports[0], 2) < 0)
			return 0;
		k.dport = ports[0];
	} else if (ip.protocol == IPPROTO_TCP || ip.protocol == IPPROTO_UDP) {
		port_off = 0;
		if (bpf_skb_load_bytes(skb, inner_l4, ports, sizeof(ports)) < 0)
			return 0;
		k.sport = ports[1];
		k.dport = ports[0];
	} else {
		return 0;
	}
	e = bpf_map_lookup_elem(&cilium_snat4, &k);
	if (!e || (nodeport_only && !e->rev_nat_index))
		return 0;
	*rev_nat = e->rev_nat_index;

	/* Quoted source port, then address and the quoted header checksum:
	 * each change also moves the ICMP checksum that covers them. */
	if (bpf_l4_csum_replace(skb, icmp_csum, k.dport, e->port, 2) < 0 ||
	    bpf_skb_store_bytes(skb, inner_l4 + port_off, &e->port, 2, 0) < 0)
		return -DROP_INVALID;
	old_csum = ip.check;
	if (bpf_l3_csum_replace(skb, inner + 10, NODE_IPV4, e->addr, 4) < 0 ||
	    bpf_skb_load_bytes(skb, inner + 10, &new_csum, 2) < 0 ||
	    bpf_l4_csum_replace(skb, icmp_csum, old_csum, new_csum, 2) < 0 ||
	    bpf_l4_csum_replace(skb, icmp_csum, NODE_IPV4, e->addr, 4) < 0 ||
	    bpf_skb_store_bytes(skb, inner + 12, &e->addr, 4, 0) < 0)
		return -DROP_INVALID;
	/* The outer destination: ICMP has no pseudo-header. */
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, NODE_IPV4, e->addr, 4) < 0 ||
	    bpf_skb_store_bytes(skb, IP_DADDR_OFF, &e->addr, 4, 0) < 0)
		return -DROP_INVALID;
	p->daddr = e->addr;
	return 1;
}

/* snat_ingress undoes the translation of a reply; it returns 1 when the
 * packet was translated, 0 when it was not ours. nodeport_only leaves
 * masqueraded flows alone (the tunnel carries no replies from the world,
 * and without MASQUERADE there are none); *rev_nat is set to a NodePort
 * flow's reverse NAT index, whose source the caller translates back. */
static __always_inline int snat_ingress(struct __sk_buff *skb, struct pkt *p, int nodeport_only, __u16 *rev_nat)
{
	struct nat4_key k = {
		.saddr = p->saddr, .daddr = p->daddr, .sport = p->sport,
		.dport = p->dport, .protocol = p->protocol, .dir = DIR_INGRESS,
	};
	struct nat4_entry *e;
	int ret;

	if (p->daddr != NODE_IPV4 || p->later_frag)
		return 0;
	if (p->protocol == IPPROTO_ICMP && icmp_is_error(p->icmp_type))
		return snat_icmp_error(skb, p, nodeport_only, rev_nat);
	e = bpf_map_lookup_elem(&cilium_snat4, &k);
	if (!e || (nodeport_only && !e->rev_nat_index))
		return 0;
	*rev_nat = e->rev_nat_index;
	ret = nat_rewrite(skb, p, 0, p->daddr, e->addr, p->dport, e->port);
	if (ret < 0)
		return ret;
	p->daddr = e->addr;
	p->dport = e->port;
	if (p->protocol != IPPROTO_ICMP)
		p->policy_port = e->port;
	return 1;
}
