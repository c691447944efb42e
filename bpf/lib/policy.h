/* SPDX-License-Identifier: Apache-2.0 */
/* Policy lookup: the longest-prefix match covers protocol and port
 * wildcards and port ranges; lookups cover the remote identity, the
 * identity wildcard and, for a pod's or node's address inside a
 * NetworkPolicy ipBlock, the block's CIDR identity. A deny from any
 * lookup wins. The control plane turns an allow nested inside a broader
 * deny of the same identity into a deny, so one LPM answer per identity
 * is enough. */
#pragma once

#include "common.h"
#include "events.h"
#include "forward.h"

/* policy_lookup adds what the entry for identity says to *matched and
 * *denied. */
static __always_inline void policy_lookup(struct policy_key *k, __u32 identity, int *matched, int *denied)
{
	struct policy_entry *e;

	k->identity = identity;
	e = bpf_map_lookup_elem(&cilium_policy, k);
	if (!e)
		return;
	*matched = 1;
	if (e->flags & POLICY_F_DENY)
		*denied = 1;
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
	int matched = 0, denied = 0, ret = 0;

	policy_lookup(&k, remote, &matched, &denied);
	policy_lookup(&k, IDENTITY_ANY, &matched, &denied);
	if (cidr)
		policy_lookup(&k, cidr, &matched, &denied);
	if (denied)
		ret = -DROP_POLICY_DENY;
	else if (!matched)
		ret = -DROP_POLICY;

	__u8 saved = f->direction;

	f->direction = dir;
	emit_event(skb, f, EVENT_POLICY_VERDICT, ret ? -ret : 0, ret ? VERDICT_DENY : VERDICT_ALLOW);
	f->direction = saved;
	return ret;
}
