/* SPDX-License-Identifier: Apache-2.0 */
/* Connection tracking: one entry per connection keyed by the tuple of its
 * first packet; replies match the reversed tuple. */
#pragma once

#include "common.h"
#include "packet.h"

#define NSEC_PER_SEC 1000000000ULL
#define CT_LIFETIME_TCP_SYN (60 * NSEC_PER_SEC)
#define CT_LIFETIME_TCP (21600 * NSEC_PER_SEC)
#define CT_LIFETIME_TCP_CLOSING (10 * NSEC_PER_SEC)
#define CT_LIFETIME_NONTCP (60 * NSEC_PER_SEC)

/* ct_now is the coarse monotonic clock: lifetimes are seconds, and the
 * coarse clock costs a load where the precise one reads the clock source,
 * which in a VM may trap. It lags CLOCK_MONOTONIC by at most a tick. */
static __always_inline __u64 ct_now(void)
{
	return bpf_ktime_get_coarse_ns();
}

static __always_inline __u64 ct_lifetime(__u8 protocol, __u16 flags)
{
	if (protocol != IPPROTO_TCP)
		return CT_LIFETIME_NONTCP;
	if (flags & (CT_F_TX_CLOSING | CT_F_RX_CLOSING))
		return CT_LIFETIME_TCP_CLOSING;
	if (flags & CT_F_SEEN_REPLY)
		return CT_LIFETIME_TCP;
	return CT_LIFETIME_TCP_SYN;
}

static __always_inline __u16 ct_closing_flag(const struct pkt *p, int reply)
{
	if (p->protocol != IPPROTO_TCP || !(p->tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)))
		return 0;
	return reply ? CT_F_RX_CLOSING : CT_F_TX_CLOSING;
}

/* ct_touch refreshes an entry. The lifetime is written only when it moves
 * by more than a second, so a busy flow does not write its entry on every
 * packet. */
static __always_inline void ct_touch(struct ct_entry *e, const struct pkt *p, int reply, __u64 now)
{
	__u16 flags = e->flags | ct_closing_flag(p, reply);
	__u64 expires;

	if (reply)
		flags |= CT_F_SEEN_REPLY;
	expires = now + ct_lifetime(p->protocol, flags);
	__sync_fetch_and_add(&e->packets, 1);
	__sync_fetch_and_add(&e->bytes, p->len);
	if (flags != e->flags) {
		e->flags = flags;
		e->expires = expires;
	} else if (expires > e->expires + NSEC_PER_SEC) {
		e->expires = expires;
	}
}

/* ct_report says whether a trace of p, which matched e, has news under
 * monitor aggregation: its direction shows a TCP flag of CT_REPORT_FLAGS
 * it had not shown, or has not reported for CT_REPORT_INTERVAL seconds.
 * Two CPUs may both report a change; that costs an event, not a miss. */
static __always_inline __u8 ct_report(struct ct_entry *e, const struct pkt *p, int reply, __u64 now)
{
	__u32 sec = now / NSEC_PER_SEC;
	__u8 seen = reply ? e->rx_flags_seen : e->tx_flags_seen;
	__u32 last = reply ? e->last_rx_report : e->last_tx_report;
	__u8 flags = seen | (p->tcp_flags & CT_REPORT_FLAGS);

	if (flags == seen && sec - last < CT_REPORT_INTERVAL)
		return 0;
	if (reply) {
		e->rx_flags_seen = flags;
		e->last_rx_report = sec;
	} else {
		e->tx_flags_seen = flags;
		e->last_tx_report = sec;
	}
	return 1;
}

/* ct_report_opened records in a new entry that the opening packet, p,
 * was reported: its flags are seen from now on. */
static __always_inline void ct_report_opened(struct ct_entry *e, const struct pkt *p, __u64 now)
{
	e->tx_flags_seen = p->tcp_flags & CT_REPORT_FLAGS;
	e->last_tx_report = now / NSEC_PER_SEC;
}

static __always_inline void ct_key_of(const struct pkt *p, struct ct4_key *k, int reverse)
{
	if (reverse) {
		k->saddr = p->daddr;
		k->daddr = p->saddr;
		k->sport = p->dport;
		k->dport = p->sport;
	} else {
		k->saddr = p->saddr;
		k->daddr = p->daddr;
		k->sport = p->sport;
		k->dport = p->dport;
	}
	k->protocol = p->protocol;
}

static __always_inline struct ct_entry *ct_find(struct ct4_key *k, __u64 now)
{
	struct ct_entry *e = bpf_map_lookup_elem(&cilium_ct4, k);

	if (e && e->expires > now)
		return e;
	return 0;
}

/* ct_related reports whether an ICMP error answers a packet of a tracked
 * connection, in either direction, and travels between that connection's
 * two ends: the quoted packet went from the error's destination to its
 * source. Anything else could carry an arbitrary payload to an arbitrary
 * address by quoting someone's flow; an error from a router on the path
 * (time exceeded, fragmentation needed) is therefore not related and
 * needs a policy that allows ICMP, as in Cilium. */
static __always_inline int ct_related(struct __sk_buff *skb, const struct pkt *p, __u64 now)
{
	struct iphdr inner;
	struct ct4_key k = {};
	__u16 ports[2] = {};
	__u32 off = p->l4_off + sizeof(struct icmphdr);

	if (bpf_skb_load_bytes(skb, off, &inner, sizeof(inner)) < 0)
		return 0;
	if (inner.ihl < 5 || inner.saddr != p->daddr || inner.daddr != p->saddr)
		return 0;
	off += inner.ihl * 4;
	k.protocol = inner.protocol;
	if (inner.protocol == IPPROTO_ICMP) {
		struct icmphdr ic;

		if (bpf_skb_load_bytes(skb, off, &ic, sizeof(ic)) < 0)
			return 0;
		if (ic.type == ICMP_ECHO)
			ports[0] = ic.un.echo.id;
		else if (ic.type == ICMP_ECHOREPLY)
			ports[1] = ic.un.echo.id;
	} else if (bpf_skb_load_bytes(skb, off, ports, sizeof(ports)) < 0) {
		return 0;
	}
	k.saddr = inner.saddr;
	k.daddr = inner.daddr;
	k.sport = ports[0];
	k.dport = ports[1];
	if (ct_find(&k, now))
		return 1;
	k.saddr = inner.daddr;
	k.daddr = inner.saddr;
	k.sport = ports[1];
	k.dport = ports[0];
	return ct_find(&k, now) != 0;
}

/* ct_reply_likely guesses from the packet alone that it answers a
 * connection: a SYN-ACK, an echo reply, or a source port below the
 * destination port (servers listen low, clients send from ephemeral
 * ports). The guessed direction's key is looked up first, so a reply
 * usually costs one lookup instead of two; a wrong guess costs a lookup
 * and never changes the answer unless both directions are tracked. */
static __always_inline int ct_reply_likely(const struct pkt *p)
{
	if (p->later_frag)
		return 0;
	switch (p->protocol) {
	case IPPROTO_TCP:
		if (p->tcp_flags & TCP_FLAG_SYN)
			return (p->tcp_flags & TCP_FLAG_ACK) != 0;
		break;
	case IPPROTO_UDP:
	case IPPROTO_SCTP:
		break;
	case IPPROTO_ICMP:
		return p->icmp_type == ICMP_ECHOREPLY;
	default:
		return 0;
	}
	return bpf_ntohs(p->sport) < bpf_ntohs(p->dport);
}

/* ct_reopens says whether p, a SYN from the opener of e's connection,
 * which is closing, opens a new connection on the same tuple. */
static __always_inline int ct_reopens(const struct ct_entry *e, const struct pkt *p)
{
	return p->protocol == IPPROTO_TCP && !p->later_frag &&
	       (p->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN &&
	       (e->flags & (CT_F_TX_CLOSING | CT_F_RX_CLOSING));
}

/* ct_lookup classifies the packet; for established flows and replies it
 * also returns the connection's entry. Callers drop CT_INVALID. *report
 * says whether a trace of the packet has news (ct_report): always, but
 * for a tracked connection under monitor aggregation. */
static __always_inline __u8 ct_lookup(struct __sk_buff *skb, const struct pkt *p, struct ct_entry **entry,
				      __u8 *report)
{
	struct ct4_key k = {};
	struct ct_entry *e;
	__u64 now = ct_now();
	int reply = ct_reply_likely(p);

	*entry = 0;
	*report = 1;
	ct_key_of(p, &k, reply);
	e = ct_find(&k, now);
	if (!e) {
		reply = !reply;
		ct_key_of(p, &k, reply);
		e = ct_find(&k, now);
	}
	/* A SYN from the opener of a connection that is closing opens a new
	 * connection on the same tuple: it is judged as any new one, by the
	 * policy of now, and its entry replaces the old. Otherwise a client
	 * reusing a port would pass on the entry of a closed connection that
	 * policy no longer allows until the entry expires. */
	if (e && !reply && ct_reopens(e, p))
		return CT_NEW;
	if (e) {
		ct_touch(e, p, reply, now);
		if (TRACE_ENABLED && MONITOR_AGGREGATION >= MONITOR_MEDIUM)
			*report = ct_report(e, p, reply, now);
		*entry = e;
		return reply ? CT_REPLY : CT_ESTABLISHED;
	}
	if (p->protocol == IPPROTO_ICMP && icmp_is_error(p->icmp_type) && !p->later_frag &&
	    ct_related(skb, p, now))
		return CT_RELATED;
	/* A TCP connection starts with a SYN. Any other segment without an
	 * entry belongs to a connection this node does not track (expired, or
	 * flushed because policy no longer allows it); taking it for a new
	 * one would let either end reopen, in whichever direction policy
	 * allows, a connection that policy has just closed. */
	if (p->protocol == IPPROTO_TCP && !p->later_frag &&
	    (p->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) != TCP_FLAG_SYN)
		return CT_INVALID;
	return CT_NEW;
}

/* ct_is_reply says that p answers a tracked connection its destination
 * opened; unlike ct_lookup it changes nothing. */
static __always_inline int ct_is_reply(const struct pkt *p)
{
	struct ct4_key k = {};

	ct_key_of(p, &k, 1);
	return ct_find(&k, ct_now()) != 0;
}

/* ct_remote_identity is the identity on the far side of the connection,
 * seen from the packet's sender. */
static __always_inline __u32 ct_remote_identity(const struct ct_entry *e, __u8 status)
{
	return status == CT_REPLY ? e->src_identity : e->dst_identity;
}

/* ct_sender_identity is the identity of the packet's sender. */
static __always_inline __u32 ct_sender_identity(const struct ct_entry *e, __u8 status)
{
	return status == CT_REPLY ? e->dst_identity : e->src_identity;
}

/* ct_remote_not_local reports that the packet's destination is known to
 * be no local endpoint. */
static __always_inline int ct_remote_not_local(const struct ct_entry *e, __u8 status)
{
	return e->flags & (status == CT_REPLY ? CT_F_NO_SRC_EP : CT_F_NO_DST_EP);
}

/* ct_sender_not_local reports that the packet's sender is known to be no
 * local endpoint, as ct_remote_not_local for the destination. */
static __always_inline int ct_sender_not_local(const struct ct_entry *e, __u8 status)
{
	return e->flags & (status == CT_REPLY ? CT_F_NO_DST_EP : CT_F_NO_SRC_EP);
}

/* ct_create tracks p's connection. rev_nat_index names the service that
 * translated it, 0 for none; proxy_port the layer-7 proxy its originator's
 * packets go to (CT_F_TO_PROXY), 0 for none. */
static __always_inline int ct_create(const struct pkt *p, __u32 src_identity, __u32 dst_identity,
				     __u32 tunnel_ipv4, __u16 flags, __u16 rev_nat_index, __u32 frontend_addr,
				     __u16 proxy_port)
{
	struct ct4_key k = {};
	struct ct_entry e = {
		.packets = 1,
		.bytes = p->len,
		.src_identity = src_identity,
		.dst_identity = dst_identity,
		.tunnel_ipv4 = tunnel_ipv4,
		.flags = ct_closing_flag(p, 0) | flags,
		.rev_nat_index = rev_nat_index,
		.frontend_addr = frontend_addr,
		.proxy_port = proxy_port,
	};

	__u64 now = ct_now();

	e.expires = now + ct_lifetime(p->protocol, e.flags);
	ct_report_opened(&e, p, now);
	ct_key_of(p, &k, 0);
	if (bpf_map_update_elem(&cilium_ct4, &k, &e, BPF_ANY) < 0)
		return -DROP_CT_CREATE;
	return 0;
}
