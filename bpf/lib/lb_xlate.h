/* SPDX-License-Identifier: Apache-2.0 */
/* East-west services at tc: a local client pod's packet to a frontend is
 * sent to a backend (its destination translated) before conntrack, policy
 * and routing see it, so all of them see the backend; what comes back is
 * translated to look like the frontend's. Socket-level balancing, where
 * it runs, translates at connect() and leaves nothing for this path.
 *
 * A translated connection has two conntrack entries. The service entry,
 * keyed by the client's tuple to the frontend with CT_KEY_SERVICE, names
 * the backend, so that every packet of the connection goes to the same
 * one, even once the backend left the service's slots (terminating). The
 * ordinary entry of the translated tuple carries the service's reverse
 * NAT index: its replies, and ICMP errors quoting its packets, are
 * translated back wherever they first meet the client's node.
 *
 * A pod reaching itself through a service (hairpin) would receive its own
 * address as the source, which its kernel drops as a martian; its packet
 * leaves with LB_HAIRPIN_IPV4 as the source instead, and the reply to that
 * address is translated back to the pod. Anti-spoofing runs before any of
 * this, so no pod can send from the hairpin address itself. */
#pragma once

#include "common.h"
#include "conntrack.h"
#include "lb.h"
#include "packet.h"

/* The hairpin source, in host order (an enum, for bpf2go); the address
 * Cilium calls IPV4_LOOPBACK. */
enum lb_hairpin {
	LB_HAIRPIN_IPV4 = 0xa9fe2a01, /* 169.254.42.1 */
};
#define HAIRPIN_IPV4 bpf_htonl(LB_HAIRPIN_IPV4)

/* What lb4_local did, besides negative drop reasons. */
enum {
	LB_NONE = 0,    /* no frontend: untouched */
	LB_XLATED = 1,  /* sent to a backend */
	LB_HAIRPIN = 2, /* sent to a backend that is the client itself */
};

/* The NodePort range: only a packet to a port in it may be for a NodePort
 * at another node's address (lb4_lookup_any_node), so that other packets
 * that match no frontend pay no second lookup. */
volatile const __u16 NODEPORT_MIN = 30000;
volatile const __u16 NODEPORT_MAX = 32767;

static __always_inline int lb_nodeport_range(__u16 dport)
{
	__u16 port = bpf_ntohs(dport);

	return port >= NODEPORT_MIN && port <= NODEPORT_MAX;
}

#define ICMP_PORT_UNREACH 3
/* How much of a packet without backend the ICMP error quotes: IP header
 * with options and 36 bytes beyond, more than the RFC's 8. Enough also
 * for bpf_skb_change_tail, which keeps what a checksum offload still
 * needs (up to the TCP checksum behind a 60-byte header). */
#define LB_ICMP_QUOTE_MAX 96

static __always_inline int lb_l4_proto(__u8 proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP;
}

/* lb4_rewrite replaces the source (dst == 0) or destination address and
 * port of a TCP, UDP or SCTP packet, fixing the checksums incrementally.
 * A later fragment has the address only: the first fragment's checksum
 * covers the whole datagram and took the change. SCTP's CRC32c covers no
 * address but does cover the ports, and BPF cannot recompute it: a port
 * change leaves it stale unless the sender left it to offload, as pods
 * on veth and netkit devices do. */
static __always_inline int lb4_rewrite(struct __sk_buff *skb, const struct pkt *p, int dst, __u32 old_addr,
				       __u32 new_addr, __u16 old_port, __u16 new_port)
{
	__u32 csum_off = 0, port_off = p->l4_off + (dst ? 2 : 0);
	__u64 flags = 0;

	if (p->protocol == IPPROTO_TCP) {
		csum_off = p->l4_off + 16;
	} else if (p->protocol == IPPROTO_UDP) {
		csum_off = p->l4_off + 6;
		flags = BPF_F_MARK_MANGLED_0; /* a zero checksum stays "none" */
	}
	if (!p->later_frag) {
		if (csum_off &&
		    bpf_l4_csum_replace(skb, csum_off, old_addr, new_addr, BPF_F_PSEUDO_HDR | flags | 4) < 0)
			return -DROP_INVALID;
		if (old_port != new_port) {
			if (csum_off && bpf_l4_csum_replace(skb, csum_off, old_port, new_port, flags | 2) < 0)
				return -DROP_INVALID;
			if (bpf_skb_store_bytes(skb, port_off, &new_port, 2, 0) < 0)
				return -DROP_INVALID;
		}
	}
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, old_addr, new_addr, 4) < 0 ||
	    bpf_skb_store_bytes(skb, dst ? IP_DADDR_OFF : IP_SADDR_OFF, &new_addr, 4, 0) < 0)
		return -DROP_INVALID;
	return 0;
}

/* A client sends more than a bare SYN only once the backend answered:
 * its service entry then lives as long as an established connection. */
static __always_inline int lb_client_established(const struct pkt *p)
{
	return p->protocol == IPPROTO_TCP && !p->later_frag &&
	       (p->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) != TCP_FLAG_SYN;
}

/* lb4_backend_of returns the backend of the client's connection to the
 * frontend: the one its service entry names while that backend exists
 * (terminating or not), else a new pick, which the entry then records.
 * 0: no backend serves. Only the client's packets refresh the entry: a
 * UDP client silent for CT_LIFETIME_NONTCP picks again on its next
 * datagram, though its backend may still be sending. With report set,
 * the entry also says whether a trace of the packet has news (ct_report),
 * for paths that track the connection by it alone. With maglev set, a
 * new pick is by the frontend's Maglev table when it has one. */
static __always_inline struct lb4_backend *lb4_backend_of(const struct pkt *p, const struct lb4_key *k,
							  const struct lb4_service *svc, int *err, __u8 *report,
							  int maglev)
{
	struct ct4_key ck = {};
	struct ct_entry e = {};
	struct lb4_backend *be;
	struct ct_entry *se;
	__u64 now = ct_now();
	__u32 id;

	ct_key_of(p, &ck, 0);
	ck.flags = CT_KEY_SERVICE;
	se = ct_find(&ck, now);
	if (se) {
		be = lb4_lookup_backend(se->backend_id);
		if (be) {
			ct_touch(se, p, lb_client_established(p), now);
			if (report)
				*report = ct_report(se, p, 0, now);
			return be;
		}
	}
	if (maglev && (svc->flags & LB_F_MAGLEV)) {
		__u32 hash = lb4_flow_hash(p->saddr, p->daddr, p->sport, p->dport, p->protocol,
					   svc->flags & LB_F_AFFINITY);

		id = lb4_select(k, svc, p->saddr, 0, &hash);
	} else {
		id = lb4_select(k, svc, p->saddr, 0, 0);
	}
	be = id ? lb4_lookup_backend(id) : 0;
	if (!be)
		return 0;
	e.packets = 1;
	e.bytes = p->len;
	e.rev_nat_index = svc->rev_nat_index;
	e.backend_id = id;
	if (lb_client_established(p))
		e.flags = CT_F_SEEN_REPLY;
	e.expires = now + ct_lifetime(p->protocol, e.flags);
	ct_report_opened(&e, p, now);
	if (report)
		*report = 1;
	if (bpf_map_update_elem(&cilium_ct4, &ck, &e, BPF_ANY) < 0)
		*err = -DROP_CT_CREATE;
	return be;
}

/* lb4_local sends a local client's packet to a frontend (the internal
 * scope) to its connection's backend. It returns LB_NONE when the packet
 * is for no frontend, LB_XLATED or LB_HAIRPIN when translated, p then
 * naming the translated packet, *rev_nat the service and *any_node the
 * node address of a NodePort that lb4_lookup_any_node found (else 0), or
 * a negative drop reason: -DROP_NO_SERVICE when no backend serves,
 * -DROP_NOT_IN_SRC_RANGE when the frontend keeps the client out. Later
 * fragments find the service by the ports of their first fragment. */
static __always_inline int lb4_local(struct __sk_buff *skb, struct pkt *p, __u16 *rev_nat, __u32 *any_node)
{
	struct lb4_service *svc;
	struct lb4_backend *be;
	struct lb4_key k;
	__u32 hairpin = HAIRPIN_IPV4;
	int ret = 0;

	if (!lb_l4_proto(p->protocol))
		return LB_NONE;
	svc = lb4_lookup_local(&k, p->daddr, p->dport, p->protocol, lb_nodeport_range(p->dport));
	if (!svc)
		return LB_NONE;
	/* A pod is judged by its own address, as kube-proxy's firewall
	 * judges it, whichever of the service's fenced frontends it uses. */
	if (lb4_source_denied(svc, p->saddr))
		return -DROP_NOT_IN_SRC_RANGE;
	*any_node = k.address ? 0 : p->daddr;
	be = lb4_backend_of(p, &k, svc, &ret, 0, 0);
	if (!be)
		return -DROP_NO_SERVICE;
	if (ret < 0)
		return ret;
	ret = lb4_rewrite(skb, p, 1, p->daddr, be->address, p->dport, be->port);
	if (ret < 0)
		return ret;
	p->daddr = be->address;
	p->dport = be->port;
	p->policy_port = be->port;
	*rev_nat = svc->rev_nat_index;
	if (p->daddr != p->saddr)
		return LB_XLATED;
	ret = lb4_rewrite(skb, p, 0, p->saddr, hairpin, p->sport, p->sport);
	if (ret < 0)
		return ret;
	p->saddr = hairpin;
	return LB_HAIRPIN;
}

/* lb4_front is what a reply of the service index shows as its source:
 * the reverse NAT entry's frontend, with the node address any_node that
 * the client reached a NodePort at when the entry names none (the
 * unspecified address of lb4_lookup_any_node). 0: the service is gone. */
static __always_inline struct lb4_reverse_nat lb4_front(__u16 index, __u32 any_node)
{
	struct lb4_reverse_nat *rn = bpf_map_lookup_elem(&cilium_lb4_reverse_nat, &index);
	struct lb4_reverse_nat front = {};

	if (!rn)
		return front;
	front = *rn;
	if (!front.address)
		front.address = any_node;
	return front;
}

/* lb4_rev_nat translates a reply of a service's connection back: its
 * source to the frontend and, on a hairpin connection, its destination
 * (the hairpin address) to the client, which is the backend itself.
 * Returns 1 when translated, 0 when the service is gone. */
static __always_inline int lb4_rev_nat(struct __sk_buff *skb, struct pkt *p, __u16 index, __u32 any_node)
{
	struct lb4_reverse_nat rn = lb4_front(index, any_node);
	__u32 backend = p->saddr, hairpin = HAIRPIN_IPV4;
	int ret;

	if (!rn.address || !lb_l4_proto(p->protocol))
		return 0;
	ret = lb4_rewrite(skb, p, 0, p->saddr, rn.address, p->sport, rn.port);
	if (ret < 0)
		return ret;
	p->saddr = rn.address;
	p->sport = rn.port;
	if (p->daddr != hairpin)
		return 1;
	ret = lb4_rewrite(skb, p, 1, hairpin, backend, p->dport, p->dport);
	if (ret < 0)
		return ret;
	p->daddr = backend;
	return 1;
}

/* lb4_quote_addr replaces an address in the IP header an ICMP error
 * quotes (field: its offset in that header), fixing the quoted header's
 * checksum and the ICMP checksum that covers both. */
static __always_inline int lb4_quote_addr(struct __sk_buff *skb, __u32 icmp_csum, __u32 inner, __u32 field,
					  __u32 old_addr, __u32 new_addr)
{
	__u16 old_csum, new_csum;

	if (bpf_skb_load_bytes(skb, inner + 10, &old_csum, 2) < 0 ||
	    bpf_l3_csum_replace(skb, inner + 10, old_addr, new_addr, 4) < 0 ||
	    bpf_skb_load_bytes(skb, inner + 10, &new_csum, 2) < 0 ||
	    bpf_l4_csum_replace(skb, icmp_csum, old_csum, new_csum, 2) < 0 ||
	    bpf_l4_csum_replace(skb, icmp_csum, old_addr, new_addr, 4) < 0 ||
	    bpf_skb_store_bytes(skb, inner + field, &new_addr, 4, 0) < 0)
		return -DROP_INVALID;
	return 0;
}

/* lb4_icmp_quoted loads the IP header and the ports an ICMP error quotes
 * from a TCP, UDP or SCTP packet; it returns the quoted L4 header's
 * offset, 0 when there is none such. */
static __always_inline __u32 lb4_icmp_quoted(struct __sk_buff *skb, const struct pkt *p, struct iphdr *ip,
					     __u16 ports[2])
{
	__u32 inner = p->l4_off + sizeof(struct icmphdr), inner_l4;

	if (p->later_frag || bpf_skb_load_bytes(skb, inner, ip, sizeof(*ip)) < 0 || ip->ihl < 5 ||
	    !lb_l4_proto(ip->protocol))
		return 0;
	inner_l4 = inner + ip->ihl * 4;
	if (bpf_skb_load_bytes(skb, inner_l4, ports, 2 * sizeof(__u16)) < 0)
		return 0;
	return inner_l4;
}

/* lb4_rev_nat_icmp_index translates an ICMP error that quotes a client's
 * packet sent to a backend of the service index: the quoted destination
 * back to the frontend (a hairpin connection's quoted source back to the
 * client), the outer source too when the backend sent the error, and a
 * hairpin error's destination. The quoted L4 checksum stays stale, as in
 * snat_icmp_error. Returns 1 when translated, 0 when the service is gone. */
static __always_inline int lb4_rev_nat_icmp_index(struct __sk_buff *skb, struct pkt *p, __u16 index,
						  __u32 any_node)
{
	__u32 inner = p->l4_off + sizeof(struct icmphdr), inner_l4, icmp_csum = p->l4_off + 2;
	__u32 hairpin = HAIRPIN_IPV4, backend;
	struct lb4_reverse_nat rn;
	struct iphdr ip;
	__u16 ports[2];
	int ret;

	inner_l4 = lb4_icmp_quoted(skb, p, &ip, ports);
	if (!inner_l4)
		return 0;
	rn = lb4_front(index, any_node);
	if (!rn.address)
		return 0;
	backend = ip.daddr;
	if (bpf_l4_csum_replace(skb, icmp_csum, ports[1], rn.port, 2) < 0 ||
	    bpf_skb_store_bytes(skb, inner_l4 + 2, &rn.port, 2, 0) < 0)
		return -DROP_INVALID;
	ret = lb4_quote_addr(skb, icmp_csum, inner, 16, backend, rn.address);
	if (ret == 0 && ip.saddr == hairpin)
		ret = lb4_quote_addr(skb, icmp_csum, inner, 12, hairpin, backend);
	if (ret < 0)
		return ret;
	/* The outer header: ICMP has no pseudo-header. */
	if (p->saddr == backend) {
		if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, backend, rn.address, 4) < 0 ||
		    bpf_skb_store_bytes(skb, IP_SADDR_OFF, &rn.address, 4, 0) < 0)
			return -DROP_INVALID;
		p->saddr = rn.address;
	}
	if (p->daddr == hairpin) {
		if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, hairpin, backend, 4) < 0 ||
		    bpf_skb_store_bytes(skb, IP_DADDR_OFF, &backend, 4, 0) < 0)
			return -DROP_INVALID;
		p->daddr = backend;
	}
	return 1;
}

/* lb4_rev_nat_icmp translates an ICMP error about a client's translated
 * packet, so that the client matches it to its socket. Only a quoted
 * packet of a tracked connection with a reverse NAT index and every flag
 * of need is translated. Returns 1 when translated. */
static __always_inline int lb4_rev_nat_icmp(struct __sk_buff *skb, struct pkt *p, __u16 need)
{
	struct ct4_key k = {};
	struct ct_entry *e;
	struct iphdr ip;
	__u16 ports[2];

	if (!lb4_icmp_quoted(skb, p, &ip, ports))
		return 0;
	k.saddr = ip.saddr;
	k.daddr = ip.daddr;
	k.sport = ports[0];
	k.dport = ports[1];
	k.protocol = ip.protocol;
	e = ct_find(&k, ct_now());
	if (!e || !e->rev_nat_index || (e->flags & need) != need)
		return 0;
	return lb4_rev_nat_icmp_index(skb, p, e->rev_nat_index, e->frontend_addr);
}

/* lb4_to_client translates what reaches a client from a service's
 * backend: a reply of a translated connection, or an ICMP error that
 * quotes one of its packets. Call it where the packet is delivered into
 * the client, once: replies redirected into a pod skip its to-container. */
static __always_inline int lb4_to_client(struct __sk_buff *skb, struct pkt *p, const struct ct_entry *ct,
					 __u8 status)
{
	if (status == CT_REPLY && ct && ct->rev_nat_index)
		return lb4_rev_nat(skb, p, ct->rev_nat_index, ct->frontend_addr);
	if ((status == CT_RELATED || status == CT_NEW) && p->protocol == IPPROTO_ICMP &&
	    icmp_is_error(p->icmp_type))
		return lb4_rev_nat_icmp(skb, p, 0);
	return 0;
}

static __always_inline __u16 lb_csum_fold(__s64 csum)
{
	__u32 s = (__u32)csum;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

/* lb4_no_service turns, in place, a client's packet to a frontend that
 * has no backend into an ICMP port unreachable from the frontend back to
 * the client, quoting the packet's start: connect() fails at once with
 * ECONNREFUSED, as behind kube-proxy's REJECT, instead of timing out. The
 * caller sends the frame back into the pod. A later fragment gets no
 * error (RFC 1122); the caller drops it. */
static __always_inline int lb4_no_service(struct __sk_buff *skb, const struct pkt *p)
{
	/* Zeros beyond the quote pad it to four bytes for bpf_csum_diff
	 * and add nothing to the sum. */
	__u8 quote[LB_ICMP_QUOTE_MAX + 4] = {};
	struct {
		struct iphdr ip;
		struct icmphdr icmp;
	} h = {};
	struct ethhdr eth, back;
	__u32 len = skb->len - ETH_HLEN, q;
	__u16 tot_len;
	__s64 csum;

	if (p->later_frag || bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) < 0 ||
	    bpf_skb_load_bytes(skb, ETH_HLEN + 2, &tot_len, 2) < 0)
		return -DROP_NO_SERVICE;
	/* The datagram, without what pads a short frame. */
	if (bpf_ntohs(tot_len) < len)
		len = bpf_ntohs(tot_len);
	q = len < LB_ICMP_QUOTE_MAX ? len : LB_ICMP_QUOTE_MAX;
	if (q < sizeof(struct iphdr) || bpf_skb_load_bytes(skb, ETH_HLEN, quote, q) < 0)
		return -DROP_INVALID;
	csum = bpf_csum_diff(0, 0, (__be32 *)quote, (q + 3) & ~3U, 0);
	if (csum < 0)
		return -DROP_INVALID;

	/* The frame goes back where it came from. */
	__builtin_memcpy(back.h_dest, eth.h_source, ETH_ALEN);
	__builtin_memcpy(back.h_source, eth.h_dest, ETH_ALEN);
	back.h_proto = eth.h_proto;
	h.ip.version = 4;
	h.ip.ihl = 5;
	h.ip.ttl = 64;
	h.ip.protocol = IPPROTO_ICMP;
	h.ip.tot_len = bpf_htons(sizeof(h) + q);
	h.ip.saddr = p->daddr;
	h.ip.daddr = p->saddr;
	h.ip.check = lb_csum_fold(bpf_csum_diff(0, 0, (__be32 *)&h.ip, sizeof(h.ip), 0));
	h.icmp.type = ICMP_DEST_UNREACH;
	h.icmp.code = ICMP_PORT_UNREACH;
	h.icmp.checksum = lb_csum_fold(bpf_csum_diff(0, 0, (__be32 *)&h.icmp, sizeof(h.icmp), csum));

	if (skb->len > ETH_HLEN + q && bpf_skb_change_tail(skb, ETH_HLEN + q, 0) < 0)
		return -DROP_INVALID;
	if (bpf_skb_adjust_room(skb, sizeof(h), BPF_ADJ_ROOM_MAC, 0) < 0)
		return -DROP_INVALID;
	if (bpf_skb_store_bytes(skb, 0, &back, sizeof(back), BPF_F_RECOMPUTE_CSUM) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN, &h, sizeof(h), BPF_F_RECOMPUTE_CSUM) < 0)
		return -DROP_INVALID;
	return 0;
}

/* lb4_is_refusal reports whether an ICMP error is what lb4_no_service
 * made of this endpoint's packet: a port unreachable from a frontend
 * without backends, quoting the endpoint's packet to it. A netkit pod
 * gets it through its to-container, which lets it in as a related error.
 * Whoever else forges one tells the pod only what is true: the service
 * has no backend. */
static __always_inline int lb4_is_refusal(struct __sk_buff *skb, const struct pkt *p, __u32 endpoint)
{
	__u32 inner = p->l4_off + sizeof(struct icmphdr);
	struct lb4_service *svc;
	struct icmphdr ic;
	struct iphdr ip;
	struct lb4_key k;
	__u16 ports[2];

	if (p->protocol != IPPROTO_ICMP || p->icmp_type != ICMP_DEST_UNREACH || p->later_frag ||
	    p->daddr != endpoint || bpf_skb_load_bytes(skb, p->l4_off, &ic, sizeof(ic)) < 0 ||
	    ic.code != ICMP_PORT_UNREACH || bpf_skb_load_bytes(skb, inner, &ip, sizeof(ip)) < 0 ||
	    ip.ihl < 5 || ip.saddr != endpoint || ip.daddr != p->saddr || !lb_l4_proto(ip.protocol) ||
	    bpf_skb_load_bytes(skb, inner + ip.ihl * 4, ports, sizeof(ports)) < 0)
		return 0;
	svc = lb4_lookup_local(&k, ip.daddr, ports[1], ip.protocol, lb_nodeport_range(ports[1]));
	return svc && !svc->count;
}

/* Keeps the enum the Go side shares in BTF for bpf2go. Never used. */
struct lb_xlate_contract {
	enum lb_hairpin hairpin;
};
struct lb_xlate_contract *const __lb_xlate_contract __attribute__((unused)) = 0;
