/* SPDX-License-Identifier: Apache-2.0 */
/* Delivery into a local endpoint from outside it: conntrack, the
 * endpoint's ingress policy, then straight into its namespace. */
#pragma once

#include "common.h"
#include "conntrack.h"
#include "events.h"
#include "forward.h"
#include "policy.h"

/* deliver_ingress expects f->src_id to hold the sender's identity. */
static __always_inline int deliver_ingress(struct __sk_buff *skb, struct flow *f,
					   const struct endpoint_info *ep)
{
	int ret;

	f->dst_ep = ep->ep_id;
	f->dst_id = ep->identity;
	f->direction = DIR_INGRESS;
	f->ct_status = ct_lookup(skb, &f->p);
	if (f->ct_status == CT_NEW) {
		if (ep->flags & EP_F_INGRESS_ENFORCE) {
			ret = policy_check(skb, f, ep->ep_id, DIR_INGRESS, f->src_id);
			if (ret < 0)
				return drop(skb, f, ret);
		}
		ret = ct_create(&f->p, f->src_id);
		if (ret < 0)
			return drop(skb, f, ret);
	}
	forwarded(skb, f, TRACE_TO_LXC);
	return redirect_to_endpoint(skb, ep);
}
