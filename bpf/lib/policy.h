/* SPDX-License-Identifier: Apache-2.0 */
/* Policy lookup, in the endpoint's own policy map: the longest-prefix
 * match covers protocol and port wildcards and port ranges; lookups cover
 * the remote identity, the identity wildcard and, for a pod's or node's
 * address inside a NetworkPolicy ipBlock, the block's CIDR identity. A
 * deny from any lookup wins. The control plane turns an allow nested inside a broader
 * deny of the same identity into a deny, so one LPM answer per identity
 * is enough. */
#pragma once

#include "common.h"
#include "events.h"
#include "forward.h"

/* verdict gathers the lookups: whether any entry matched, whether one
 * denied, the cookie of the entry that decides (the first deny, else the
 * first allow), and the proxy port of an allow with layer-7 rules. Any
 * such allow sends the connection to the proxy: another allow of the
 * same packet never bypasses the layer-7 rules, and the proxy lets
 * through what that allow allows. */
struct verdict {
	int matched, denied;
	__u32 cookie;
	__u16 proxy_port;
};

static __always_inline void policy_lookup(void *map, struct policy_key *k, __u32 identity, struct verdict *v)
{
	struct policy_entry *e;

	k->identity = identity;
	e = bpf_map_lookup_elem(map, k);
	if (!e)
		return;
	if (e->flags & POLICY_F_DENY) {
		if (!v->denied)
			v->cookie = e->cookie;
		v->denied = 1;
	} else {
		if (!v->matched && !v->denied)
			v->cookie = e->cookie;
		if (e->proxy_port)
			v->proxy_port = e->proxy_port;
	}
	v->matched = 1;
}

/* policy_peek looks up f's connection in endpoint ep_id's policy in
 * dir, and changes nothing: below 0 a drop reason, 0 allowed, above 0
 * allowed through the layer-7 proxy on that port; v says why. */
static __always_inline int policy_peek(const struct flow *f, __u16 ep_id, __u8 dir, __u32 remote,
				       __u32 remote_addr, struct verdict *v)
{
	struct ipcache_info *info = ipcache_lookup4(remote_addr);
	__u32 cidr = info ? info->cidr_identity : 0;
	struct policy_key k = {
		.prefixlen = POLICY_PREFIX_FULL,
		.ep_id = ep_id,
		.direction = dir,
		.protocol = f->p.protocol,
		.dport = f->p.policy_port,
	};
	__u32 ep = ep_id;
	void *map = bpf_map_lookup_elem(&cilium_policy_v2, &ep);

	if (map) {
		policy_lookup(map, &k, remote, v);
		policy_lookup(map, &k, IDENTITY_ANY, v);
		if (cidr)
			policy_lookup(map, &k, cidr, v);
	}
	if (v->denied)
		return -DROP_POLICY_DENY;
	if (!v->matched)
		return -DROP_POLICY;
	return v->proxy_port;
}

/* policy_check is policy_peek that reports the verdict as an event. */
static __always_inline int policy_check(struct __sk_buff *skb, struct flow *f, __u16 ep_id,
					__u8 dir, __u32 remote, __u32 remote_addr)
{
	struct verdict v = {};
	int ret = policy_peek(f, ep_id, dir, remote, remote_addr, &v);
	enum policy_verdict verdict = ret < 0 ? VERDICT_DENY : ret > 0 ? VERDICT_REDIRECT : VERDICT_ALLOW;
	__u8 saved = f->direction;

	f->direction = dir;
	f->policy_cookie = v.cookie;
	emit_event(skb, f, EVENT_POLICY_VERDICT, ret < 0 ? -ret : 0, verdict);
	f->direction = saved;
	if (ret >= 0)
		f->policy_cookie = 0; /* only the drop that follows a deny names it */
	return ret;
}

/* policy_check_l4 is policy_check where the datapath cannot send a
 * connection to the proxy (a to-container, which is no tc ingress): an
 * allow with layer-7 rules drops there rather than let through what its
 * rules refuse. */
static __always_inline int policy_check_l4(struct __sk_buff *skb, struct flow *f, __u16 ep_id,
					   __u8 dir, __u32 remote, __u32 remote_addr)
{
	int ret = policy_check(skb, f, ep_id, dir, remote, remote_addr);

	return ret > 0 ? -DROP_PROXY_LOOKUP_FAILED : ret;
}
