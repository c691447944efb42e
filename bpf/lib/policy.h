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
 * denied, and the cookie of the entry that decides (the first deny, else
 * the first allow). */
struct verdict {
	int matched, denied;
	__u32 cookie;
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
	} else if (!v->matched && !v->denied) {
		v->cookie = e->cookie;
	}
	v->matched = 1;
}

static __always_inline int policy_check(struct __sk_buff *skb, struct flow *f, __u16 ep_id,
					__u8 dir, __u32 remote, __u32 remote_addr)
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
	struct verdict v = {};
	int ret = 0;

	if (map) {
		policy_lookup(map, &k, remote, &v);
		policy_lookup(map, &k, IDENTITY_ANY, &v);
		if (cidr)
			policy_lookup(map, &k, cidr, &v);
	}
	if (v.denied)
		ret = -DROP_POLICY_DENY;
	else if (!v.matched)
		ret = -DROP_POLICY;

	__u8 saved = f->direction;

	f->direction = dir;
	f->policy_cookie = v.cookie;
	emit_event(skb, f, EVENT_POLICY_VERDICT, ret ? -ret : 0, ret ? VERDICT_DENY : VERDICT_ALLOW);
	f->direction = saved;
	if (!ret)
		f->policy_cookie = 0; /* only the drop that follows a deny names it */
	return ret;
}
