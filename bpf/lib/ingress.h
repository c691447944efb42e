/* SPDX-License-Identifier: Apache-2.0 */
/* Delivery into a local endpoint from outside it: conntrack, the
 * endpoint's ingress policy, then straight into its namespace, or to the
 * layer-7 proxy where the endpoint's ingress rules say so. */
#pragma once

#include "common.h"
#include "conntrack.h"
#include "events.h"
#include "forward.h"
#include "lb_xlate.h"
#include "policy.h"
#include "proxy.h"

/* deliver_ingress delivers to ep. f->src_id is the sender's identity when
 * the caller knows it (the VNI); otherwise the ipcache is asked, and only
 * for what needs it: a new connection or an event. tunnel is the node
 * the packet came from, 0 in native routing. f->rev_nat names the
 * service whose external frontend sent a packet from outside to ep
 * (lib/nodeport.h): its connection then says so (CT_F_NODEPORT), so that
 * ep's replies are translated back as they leave ep. */
static __always_inline int deliver_ingress(struct __sk_buff *skb, struct flow *f,
					   const struct endpoint_info *ep, __u32 tunnel)
{
	struct ct_entry *ct;
	int ret;

	f->dst_ep = ep->ep_id;
	f->dst_id = ep->identity;
	f->direction = DIR_INGRESS;
	f->ct_status = ct_lookup(skb, &f->p, &ct, &f->report);
	/* No endpoint of this node sends through the network: a packet that
	 * claims to is spoofed. A tracked connection knows whether its
	 * sender is local, which spares established packets the lookup. */
	if ((f->ct_status == CT_ESTABLISHED || f->ct_status == CT_REPLY) ? !ct_sender_not_local(ct, f->ct_status) :
									  endpoint_lookup4(f->p.saddr) != 0) {
		if (!f->src_id)
			f->src_id = IDENTITY_WORLD;
		return drop(skb, f, DROP_INVALID_SIP);
	}
	if (f->ct_status == CT_INVALID) {
		if (!f->src_id)
			f->src_id = sender_identity4(f->p.saddr);
		return drop(skb, f, DROP_UNKNOWN_CT);
	}
	if (f->ct_status == CT_NEW) {
		__u16 proxy_port = 0;

		if (!f->src_id)
			f->src_id = sender_identity4(f->p.saddr);
		if (ep->flags & EP_F_INGRESS_ENFORCE) {
			ret = policy_check(skb, f, ep->ep_id, DIR_INGRESS, f->src_id, f->p.saddr);
			if (ret < 0)
				return drop(skb, f, ret);
			proxy_port = ret;
		}
		/* The sender came from the network: no local endpoint. */
		ret = ct_create(&f->p, f->src_id, f->dst_id, tunnel,
				CT_F_NO_SRC_EP | (f->rev_nat ? CT_F_NODEPORT : 0) | (proxy_port ? CT_F_TO_PROXY : 0),
				f->rev_nat, 0, proxy_port);
		if (ret < 0)
			return drop(skb, f, ret);
		if (proxy_port)
			return redirect_to_proxy(skb, f, proxy_port);
	} else if (TRACE_ENABLED && !f->src_id) {
		f->src_id = ct ? ct_sender_identity(ct, f->ct_status) : sender_identity4(f->p.saddr);
	}
	/* A connection the server's ingress rules send to the proxy. */
	if (ct && (ct->flags & CT_F_TO_PROXY) && f->ct_status == CT_ESTABLISHED)
		return redirect_to_proxy(skb, f, ct->proxy_port);
	/* A tuple reused through another frontend has its replies
	 * translated as its last packet was. */
	if (f->rev_nat && ct && f->ct_status == CT_ESTABLISHED && ct->rev_nat_index != f->rev_nat) {
		ct->rev_nat_index = f->rev_nat;
		ct->flags |= CT_F_NODEPORT;
	}
	/* Events name the service a reply's connection went through. */
	if (f->ct_status == CT_REPLY && ct)
		f->rev_nat = ct->rev_nat_index;
	/* A reply to the proxy's connection upstream goes to the proxy. */
	if (ct && (ct->flags & CT_F_PROXY_UPSTREAM) && f->ct_status == CT_REPLY)
		return to_proxy_upstream(skb, f);
	/* A remote backend's reply to a local client of its service. */
	ret = lb4_to_client(skb, &f->p, ct, f->ct_status);
	if (ret < 0)
		return drop(skb, f, ret);
	forwarded(skb, f, TRACE_TO_LXC);
	return redirect_to_endpoint(skb, ep);
}

/* legacy_to_proxy says whether f's packet, from the network to local
 * endpoint ep, is of a connection that ep's ingress rules send to the
 * proxy, and changes nothing. With legacy routing the other packets for
 * ep cross the stack to its to-container, which is no tc ingress and
 * cannot redirect: these are delivered where they came in
 * (deliver_ingress). Fills in f->src_id where it was unknown. */
static __always_inline int legacy_to_proxy(struct flow *f, const struct endpoint_info *ep)
{
	struct ct4_key k = {};
	struct ct_entry *e;
	struct verdict v = {};

	if (!(ep->flags & EP_F_INGRESS_ENFORCE) || f->p.later_frag)
		return 0;
	ct_key_of(&f->p, &k, 0);
	e = ct_find(&k, ct_now());
	if (e && !ct_reopens(e, &f->p))
		return (e->flags & CT_F_TO_PROXY) != 0;
	/* A reply, or a segment of a connection no one tracks, is the
	 * to-container's to judge. */
	if (!e && (ct_is_reply(&f->p) ||
		   (f->p.protocol == IPPROTO_TCP && (f->p.tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) != TCP_FLAG_SYN)))
		return 0;
	if (!f->src_id)
		f->src_id = sender_identity4(f->p.saddr);
	return policy_peek(f, ep->ep_id, DIR_INGRESS, f->src_id, f->p.saddr, &v) > 0;
}
