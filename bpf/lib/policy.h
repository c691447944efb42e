/* SPDX-License-Identifier: Apache-2.0 */
/* Policy lookup: the longest-prefix match covers protocol and port
 * wildcards and port ranges; two lookups cover the remote identity and the
 * identity wildcard. A deny from either lookup wins. The control plane
 * turns an allow nested inside a broader deny of the same identity into a
 * deny, so one LPM answer per identity is enough. */
#pragma once

#include "common.h"
#include "events.h"

static __always_inline int policy_check(struct __sk_buff *skb, struct flow *f, __u16 ep_id,
					__u8 dir, __u32 remote)
{
	struct policy_key k = {
		.prefixlen = POLICY_PREFIX_FULL,
		.identity = remote,
		.ep_id = ep_id,
		.direction = dir,
		.protocol = f->p.protocol,
		.dport = f->p.policy_port,
	};
	struct policy_entry *exact, *any;
	int ret = 0;

	exact = bpf_map_lookup_elem(&cilium_policy, &k);
	k.identity = IDENTITY_ANY;
	any = bpf_map_lookup_elem(&cilium_policy, &k);
	if ((exact && (exact->flags & POLICY_F_DENY)) || (any && (any->flags & POLICY_F_DENY)))
		ret = -DROP_POLICY_DENY;
	else if (!exact && !any)
		ret = -DROP_POLICY;

	__u8 saved = f->direction;

	f->direction = dir;
	emit_event(skb, f, EVENT_POLICY_VERDICT, ret ? -ret : 0, ret ? VERDICT_DENY : VERDICT_ALLOW);
	f->direction = saved;
	return ret;
}
