/* SPDX-License-Identifier: Apache-2.0 */
/* Events to the ring buffer and per-CPU counters. */
#pragma once

#include "common.h"
#include "packet.h"

/* A packet and what the datapath decided about it so far. */
struct flow {
	struct pkt p;
	__u32 src_id;
	__u32 dst_id;
	__u16 src_ep;
	__u16 dst_ep;
	__u16 rev_nat; /* the service that translated the packet, 0: none */
	__u8 ct_status; /* enum ct_status */
	__u8 direction; /* enum traffic_direction */
	__u8 report; /* a trace of the packet has news (ct_lookup) */
	__u32 policy_cookie; /* the deciding policy entry's, for events */
};

static __always_inline void metrics_add(enum drop_reason reason, __u8 dir, __u32 len)
{
	__u32 k = METRICS_INDEX(reason, dir);
	struct metrics_value *v = bpf_map_lookup_elem(&cilium_metrics, &k);

	if (v) {
		v->packets++;
		v->bytes += len;
	}
}

static __always_inline void emit_event(struct __sk_buff *skb, const struct flow *f,
				       enum event_type type, __u8 subtype,
				       enum policy_verdict verdict)
{
	struct event *e = bpf_ringbuf_reserve(&cilium_events, sizeof(*e), 0);

	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->ktime = bpf_ktime_get_ns();
	e->ifindex = skb->ifindex;
	e->src_identity = f->src_id;
	e->dst_identity = f->dst_id;
	e->len = skb->len;
	__builtin_memcpy(e->saddr, &f->p.saddr, 4);
	__builtin_memcpy(e->daddr, &f->p.daddr, 4);
	e->sport = f->p.sport;
	e->dport = f->p.dport;
	e->source_ep = f->src_ep;
	e->dst_ep = f->dst_ep;
	e->type = type;
	e->subtype = subtype;
	e->protocol = f->p.protocol;
	e->direction = f->direction;
	e->verdict = verdict;
	e->ct_status = f->ct_status;
	e->tcp_flags = f->p.tcp_flags;
	e->family = FAMILY_INET;
	e->policy_cookie = f->policy_cookie;
	e->rev_nat = f->rev_nat;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int drop(struct __sk_buff *skb, const struct flow *f, int reason)
{
	if (reason < 0)
		reason = -reason;
	emit_event(skb, f, EVENT_DROP, reason, 0);
	metrics_add(reason, f->direction, skb->len);
	return TC_ACT_SHOT;
}

/* trace_wanted says whether a trace of f at point passes monitor
 * aggregation. Without conntrack's word (f->report unset) a medium
 * aggregation reports nothing, as Cilium's. */
static __always_inline int trace_wanted(const struct flow *f, enum trace_point point)
{
	if (!TRACE_ENABLED)
		return 0;
	if (MONITOR_AGGREGATION >= MONITOR_LOWEST &&
	    (point == TRACE_FROM_LXC || point == TRACE_FROM_HOST ||
	     point == TRACE_FROM_OVERLAY || point == TRACE_FROM_NETWORK))
		return 0;
	return MONITOR_AGGREGATION < MONITOR_MEDIUM || f->report;
}

/* forwarded counts a packet let through and traces it as monitor
 * aggregation allows. */
static __always_inline void forwarded(struct __sk_buff *skb, const struct flow *f,
				      enum trace_point point)
{
	if (trace_wanted(f, point))
		emit_event(skb, f, EVENT_TRACE, point, 0);
	metrics_add(REASON_FORWARDED, f->direction, skb->len);
}
