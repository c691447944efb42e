/* SPDX-License-Identifier: Apache-2.0 */
/* Lookups of local endpoints and the ipcache, and the ways a packet
 * leaves a program: into a local pod, into the tunnel, or routed. */
#pragma once

#include "common.h"
#include "packet.h"

static __always_inline struct endpoint_info *endpoint_lookup4(__u32 addr)
{
	struct endpoint_key k = { .family = FAMILY_INET };

	__builtin_memcpy(k.addr, &addr, 4);
	return bpf_map_lookup_elem(&cilium_lxc, &k);
}

/* identity_is_world: the world, or a prefix of it (a CIDR identity). */
static __always_inline int identity_is_world(__u32 id)
{
	return id == IDENTITY_WORLD || (id & IDENTITY_SCOPE_LOCAL);
}

/* sender_identity4 is the identity of a packet's sender that arrived
 * from the uplink or the tunnel, where its source address is whatever
 * the sender wrote. The identities only this node gives its own
 * addresses and endpoints (the host, init, unmanaged) never arrive that
 * way: such a sender is the world, as Cilium judges it. */
static __always_inline __u32 sender_identity4(__u32 addr)
{
	__u32 id = identity_of4(addr);

	switch (id) {
	case IDENTITY_HOST:
	case IDENTITY_UNMANAGED:
	case IDENTITY_INIT:
		return IDENTITY_WORLD;
	}
	return id;
}

/* set_macs rewrites the Ethernet addresses in place: direct packet
 * access, no helper call. */
static __always_inline int set_macs(struct __sk_buff *skb, const __u8 *dst, const __u8 *src)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, src, ETH_ALEN);
	return 0;
}

static __always_inline int set_endpoint_macs(struct __sk_buff *skb, const struct endpoint_info *ep)
{
	return set_macs(skb, ep->mac, ep->node_mac);
}

/* redirect_to_endpoint hands the packet to the pod's namespace directly,
 * skipping the host stack and the host-side device's egress. It works
 * from a tc ingress only. */
static __always_inline int redirect_to_endpoint(struct __sk_buff *skb, const struct endpoint_info *ep)
{
	if (set_endpoint_macs(skb, ep) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect_peer(ep->ifindex, 0);
}

/* redirect_to_endpoint_egress sends the packet out of the pod's host-side
 * device, whose to-container then sees it: the way into a pod from where
 * bpf_redirect_peer is refused, such as a netkit pod's transmit. */
static __always_inline int redirect_to_endpoint_egress(struct __sk_buff *skb, const struct endpoint_info *ep)
{
	if (set_endpoint_macs(skb, ep) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(ep->ifindex, 0);
}

/* redirect_to_tunnel encapsulates with the source identity as the VNI. */
static __always_inline int redirect_to_tunnel(struct __sk_buff *skb, __u32 tunnel_ipv4, __u32 identity)
{
	struct bpf_tunnel_key key = {
		.remote_ipv4 = bpf_ntohl(tunnel_ipv4),
		.tunnel_id = identity,
		.tunnel_ttl = 64,
	};

	if (bpf_skb_set_tunnel_key(skb, &key, sizeof(key), BPF_F_ZERO_CSUM_TX) < 0)
		return TC_ACT_SHOT;
	skb->mark = MARK_ENCAPSULATED;
	return bpf_redirect(TUNNEL_IFINDEX, 0);
}

/* dec_ttl counts the hop the stack would have counted, updating the
 * header checksum incrementally (RFC 1624) as the stack does. A packet on
 * its last hop is left to the stack, which answers with time exceeded. */
static __always_inline int dec_ttl(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + ETH_HLEN;
	__u32 check;

	if ((void *)(ip + 1) > data_end || ip->ttl <= 1)
		return -1;
	check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xffff));
	ip->ttl--;
	return 0;
}

/* fib_slot spreads (source, destination) over the FIB cache. */
static __always_inline __u32 fib_slot(__u32 saddr, __u32 daddr)
{
	__u32 h = (daddr * 0x9e3779b1) ^ saddr;

	return (h ^ (h >> 16)) & (FIB_CACHE_SLOTS - 1);
}

static __always_inline __u32 fib_generation(void)
{
	__u32 zero = 0;
	__u32 *gen = bpf_map_lookup_elem(&cilium_fib_gen, &zero);

	return gen ? *gen : 0;
}

static __always_inline int fib_cached(const struct fib4_entry *c, const struct pkt *p, __u32 iif,
				      __u32 gen, __u64 now)
{
	return c->expires > now && c->generation == gen && c->saddr == p->saddr &&
	       c->daddr == p->daddr && c->iif == iif;
}

/* redirect_routed forwards by the kernel's FIB without a trip through the
 * stack; anything the FIB cannot answer goes to the stack. A resolved
 * answer is cached (struct fib4_entry); the generation is read before
 * the lookup, so an answer that may predate a route change is stored
 * under the generation that change invalidates. */
static __always_inline int redirect_routed(struct __sk_buff *skb, const struct pkt *p)
{
	struct bpf_fib_lookup fib = {
		.family = FAMILY_INET,
		.ifindex = skb->ifindex, /* at tc ingress: the receiving device */
		.ipv4_src = p->saddr,
		.ipv4_dst = p->daddr,
	};
	__u32 slot = fib_slot(p->saddr, p->daddr);
	__u32 gen = fib_generation();
	__u64 now = bpf_ktime_get_coarse_ns();
	struct fib4_entry *c = bpf_map_lookup_elem(&cilium_fib4, &slot);
	long rc;

	if (c && fib_cached(c, p, skb->ifindex, gen, now)) {
		if (dec_ttl(skb) < 0)
			return TC_ACT_OK;
		if (set_macs(skb, c->dmac, c->smac) < 0)
			return TC_ACT_SHOT;
		return bpf_redirect(c->oif, 0);
	}
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return TC_ACT_OK;
	if (dec_ttl(skb) < 0)
		return TC_ACT_OK;
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		if (c) {
			c->expires = now + FIB_CACHE_LIFETIME;
			c->saddr = p->saddr;
			c->daddr = p->daddr;
			c->iif = skb->ifindex;
			c->oif = fib.ifindex;
			c->generation = gen;
			__builtin_memcpy(c->dmac, fib.dmac, 6);
			__builtin_memcpy(c->smac, fib.smac, 6);
		}
		if (set_macs(skb, fib.dmac, fib.smac) < 0)
			return TC_ACT_SHOT;
		return bpf_redirect(fib.ifindex, 0);
	}
	return bpf_redirect_neigh(fib.ifindex, 0, 0, 0);
}
