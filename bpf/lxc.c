// SPDX-License-Identifier: Apache-2.0
/* Programs on a pod's device pair: at the host-side veth's tc ingress and
 * egress, or on a netkit pair's peer (the pod's transmit) and primary (the
 * node's transmit towards the pod). One object is loaded per endpoint
 * with the endpoint's constants below. */
#include "lib/common.h"
#include "lib/conntrack.h"
#include "lib/events.h"
#include "lib/forward.h"
#include "lib/lb.h"
#include "lib/lb_xlate.h"
#include "lib/ingress.h"
/* Unused here: this object declares every map of the node, which
 * internal/datapath opens from its spec. */
#include "lib/l2responder.h"
#include "lib/nat.h"
#include "lib/nodeport.h"
#include "lib/packet.h"
#include "lib/policy.h"
#include "lib/proxy.h"

volatile const __u16 ENDPOINT_ID = 0;
volatile const __u32 ENDPOINT_IDENTITY = 0;
volatile const __u32 ENDPOINT_IPV4 = 0; /* network order */
volatile const __u8 POLICY_INGRESS = 0;
volatile const __u8 POLICY_EGRESS = 0;
/* NETKIT: the pod's device is a netkit peer. cil_from_container then runs
 * as the pod transmits, in the node's namespace, rather than at the
 * host-side veth's tc ingress. */
volatile const __u8 NETKIT = 0;

/* egress_new judges a new connection: this endpoint's egress policy and,
 * for a local peer, the peer's ingress policy; then tracks it. A pod that
 * reaches itself through a Service (hairpin: the translation here sent it
 * back) is loopback, which policy never judges, as Cilium does not; a
 * packet the pod addressed to itself is judged like any other. any_node
 * is the node address of a NodePort that sent the connection to its
 * backend (lb4_local), for its replies. Above 0 it returns the port of
 * the layer-7 proxy that the connection goes to: this endpoint's egress
 * rules', whose proxy also judges the requests by the peer's ingress
 * rules (the peer's ingress policy then judges the proxy's connection
 * upstream, not this one), else the peer's ingress rules'. */
static __always_inline int egress_new(struct __sk_buff *skb, struct flow *f,
				      const struct endpoint_info *ep, __u32 tunnel, int hairpin, __u32 any_node)
{
	int loopback = hairpin && ep && ep->ep_id == ENDPOINT_ID;
	__u16 flags = 0, proxy_port = 0;
	int ret;

	if (POLICY_EGRESS && !loopback) {
		ret = policy_check(skb, f, ENDPOINT_ID, DIR_EGRESS, f->dst_id, f->p.daddr);
		if (ret < 0)
			return ret;
		proxy_port = ret;
	}
	if (ep && !loopback && !proxy_port && (ep->flags & EP_F_INGRESS_ENFORCE)) {
		ret = policy_check(skb, f, ep->ep_id, DIR_INGRESS, ENDPOINT_IDENTITY, f->p.saddr);
		if (ret < 0) {
			f->direction = DIR_INGRESS;
			return ret;
		}
		proxy_port = ret;
	}
	/* With legacy routing the uplink masquerades, after the stack
	 * chose the final destination; this connection may be a Service's.
	 * The proxy's own connection upstream is masqueraded in its turn. */
	if (MASQUERADE && !LEGACY_ROUTING && !proxy_port && identity_is_world(f->dst_id))
		flags |= CT_F_SNAT;
	if (!ep)
		flags |= CT_F_NO_DST_EP;
	if (proxy_port)
		flags |= CT_F_TO_PROXY;
	ret = ct_create(&f->p, ENDPOINT_IDENTITY, f->dst_id, tunnel, flags, f->rev_nat, any_node, proxy_port);
	return ret < 0 ? ret : proxy_port;
}

/* no_service answers a packet to a frontend without backends with an ICMP
 * port unreachable, sent straight back into the pod, and counts it as a
 * drop. On netkit, where this program runs in the pod's transmit, the
 * way back in is the host side's transmit, whose to-container knows the
 * answer for what it is (lb4_is_refusal). */
static __always_inline int no_service(struct __sk_buff *skb, struct flow *f)
{
	struct endpoint_info *self;

	emit_event(skb, f, EVENT_DROP, DROP_NO_SERVICE, 0);
	metrics_add(DROP_NO_SERVICE, f->direction, skb->len);
	self = endpoint_lookup4(ENDPOINT_IPV4);
	if (!self || lb4_no_service(skb, &f->p) < 0)
		return TC_ACT_SHOT;
	if (NETKIT)
		return redirect_to_endpoint_egress(skb, self);
	return redirect_to_endpoint(skb, self);
}

/* cil_from_container sees every packet the pod sends. */
SEC("tc")
int cil_from_container(struct __sk_buff *skb)
{
	struct flow f = {
		.src_id = ENDPOINT_IDENTITY,
		.src_ep = ENDPOINT_ID,
		.direction = DIR_EGRESS,
	};
	struct endpoint_info *ep;
	struct ct_entry *ct;
	__u32 tunnel = 0, any_node = 0;
	int ret, snat = 0, hairpin, to_client;

	ret = parse_ipv4(skb, &f.p);
	if (ret == PARSE_NOT_IPV4) {
		if (f.p.eth_proto_arp)
			return TC_ACT_OK;
		return drop(skb, &f, DROP_UNSUPPORTED_L3);
	}
	if (f.p.saddr != ENDPOINT_IPV4 && (ret == 0 || f.p.saddr))
		return drop(skb, &f, DROP_INVALID_SIP);
	if (ret < 0)
		return drop(skb, &f, ret);
	frag_record(&f.p);

	/* A service's frontend becomes its backend before anything judges
	 * the packet: policy, conntrack, routing and events see the backend. */
	ret = lb4_local(skb, &f.p, &f.rev_nat, &any_node);
	if (ret == -DROP_NO_SERVICE)
		return no_service(skb, &f);
	if (ret < 0)
		return drop(skb, &f, ret);
	hairpin = ret == LB_HAIRPIN;

	f.ct_status = ct_lookup(skb, &f.p, &ct, &f.report);
	if (f.ct_status == CT_INVALID)
		return drop(skb, &f, DROP_UNKNOWN_CT);
	/* A tuple the proxy's upstream took over from an earlier connection
	 * of this pod (proxy_owns): the pod's again, as a new connection,
	 * once the upstream's socket is gone; until then its packets on it
	 * go nowhere. */
	if (f.ct_status == CT_ESTABLISHED && (ct->flags & CT_F_PROXY_UPSTREAM)) {
		if (proxy_upstream_live(skb, &f.p))
			return drop(skb, &f, DROP_UNKNOWN_CT);
		f.ct_status = CT_NEW;
		ct = 0;
	}
	/* What this pod sends back to a client of a service it backs (a
	 * reply, or an ICMP error about the client's packet) is translated
	 * back where it enters the client. A hairpin client is this pod,
	 * behind the hairpin address. */
	to_client = f.ct_status == CT_RELATED || (f.ct_status == CT_REPLY && ct->rev_nat_index);
	/* Events name the service a reply's connection went through. */
	if (f.ct_status == CT_REPLY && ct)
		f.rev_nat = ct->rev_nat_index;
	if (to_client && f.p.daddr == HAIRPIN_IPV4)
		hairpin = 1;
	/* Most packets go to remote pods or the world: a tracked connection
	 * that says so saves the endpoint lookup. */
	ep = ct && ct_remote_not_local(ct, f.ct_status) ? 0 :
	     endpoint_lookup4(hairpin && to_client ? f.p.saddr : f.p.daddr);
	if (ep) {
		f.dst_ep = ep->ep_id;
		f.dst_id = ep->identity;
	}
	if (ct) {
		f.dst_id = ct_remote_identity(ct, f.ct_status);
		tunnel = ct->tunnel_ipv4;
		snat = f.ct_status == CT_ESTABLISHED && (ct->flags & CT_F_SNAT);
		/* A tuple used directly and then through a service (or the
		 * other way round) has its replies translated as its last
		 * packet was. */
		if (f.ct_status == CT_ESTABLISHED &&
		    (ct->rev_nat_index != f.rev_nat || ct->frontend_addr != any_node)) {
			ct->rev_nat_index = f.rev_nat;
			ct->frontend_addr = any_node;
		}
	} else if (!ep) {
		struct ipcache_info *info = ipcache_lookup4(f.p.daddr);

		f.dst_id = info ? info->identity : IDENTITY_WORLD;
		tunnel = info ? info->tunnel_ipv4 : 0;
	}
	if (f.ct_status == CT_NEW) {
		ret = egress_new(skb, &f, ep, tunnel, hairpin, any_node);
		if (ret < 0)
			return drop(skb, &f, ret);
		if (ret)
			return redirect_to_proxy(skb, &f, ret);
		snat = MASQUERADE && identity_is_world(f.dst_id);
	}
	if (ct && (ct->flags & CT_F_TO_PROXY) && f.ct_status == CT_ESTABLISHED)
		return redirect_to_proxy(skb, &f, ct->proxy_port);
	/* A local peer's reply to the proxy's connection upstream goes to the
	 * proxy's socket, not to the endpoint whose address it used. */
	if (ct && (ct->flags & CT_F_PROXY_UPSTREAM) && f.ct_status == CT_REPLY)
		return to_proxy_upstream(skb, &f);

	/* What this pod sends back to a client from outside, which reached
	 * it through an external frontend, leaves translated for the
	 * uplink: no client node translates it. Not through the stack, in
	 * any mode: its source is now the node's own address. */
	if (!ep && to_client) {
		ret = nodeport_to_client(skb, &f.p, ct, f.ct_status);
		if (ret < 0)
			return drop(skb, &f, ret);
		if (ret) {
			forwarded(skb, &f, TRACE_TO_STACK);
			return redirect_routed(skb, &f.p);
		}
	}

	/* With legacy routing every packet crosses the stack, so that
	 * netfilter (kube-proxy) sees both directions of every connection:
	 * it drops what it has not seen start. A local peer's to-container
	 * finds the connection this program tracked; the VXLAN device's
	 * to-overlay encapsulates; masquerading happens at the uplink's
	 * egress, after the stack's own translations. A hairpin packet goes
	 * straight back into this pod: the stack has no route for the
	 * hairpin address. */
	if (LEGACY_ROUTING && !hairpin) {
		forwarded(skb, &f, TRACE_TO_STACK);
		return TC_ACT_OK;
	}
	if (ep) {
		/* Not at a tc ingress on netkit: the peer's to-container finds
		 * the connection tracked above, translates what goes back to a
		 * client, and netkit crosses into the pod. */
		if (NETKIT) {
			forwarded(skb, &f, TRACE_TO_LXC);
			return redirect_to_endpoint_egress(skb, ep);
		}
		if (to_client) {
			ret = lb4_to_client(skb, &f.p, ct, f.ct_status);
			if (ret < 0)
				return drop(skb, &f, ret);
		}
		forwarded(skb, &f, TRACE_TO_LXC);
		return redirect_to_endpoint(skb, ep);
	}
	if (TUNNEL_MODE == ROUTING_TUNNEL && tunnel) {
		forwarded(skb, &f, TRACE_TO_OVERLAY);
		return redirect_to_tunnel(skb, tunnel, ENDPOINT_IDENTITY);
	}
	forwarded(skb, &f, TRACE_TO_STACK);
	if (snat) {
		ret = snat_egress(skb, &f.p);
		if (ret < 0)
			return drop(skb, &f, ret);
	}
	return redirect_routed(skb, &f.p);
}

/* cil_to_container sees what the host stack sends to the pod; peers
 * redirected by bpf_redirect_peer bypass it and were judged already. */
SEC("tc")
int cil_to_container(struct __sk_buff *skb)
{
	struct flow f = {
		.dst_id = ENDPOINT_IDENTITY,
		.dst_ep = ENDPOINT_ID,
		.direction = DIR_INGRESS,
	};
	struct ct_entry *ct;
	int ret, proxied;

	ret = parse_ipv4(skb, &f.p);
	if (ret == PARSE_NOT_IPV4)
		return TC_ACT_OK;
	if (ret < 0)
		return drop(skb, &f, ret);
	frag_record(&f.p);
	f.ct_status = ct_lookup(skb, &f.p, &ct, &f.report);
	f.src_id = ct ? ct_sender_identity(ct, f.ct_status) : identity_of4(f.p.saddr);
	if (f.ct_status == CT_INVALID)
		return drop(skb, &f, DROP_UNKNOWN_CT);
	/* A netkit pod's own packet refused for want of a backend. The
	 * proxy's connection upstream is judged as new whatever entry its
	 * tuple finds (proxy_owns). The proxy judged the requests of its
	 * connection by this endpoint's layer-7 rules: an egress proxy's
	 * passes an allow that sends to the proxy, an ingress proxy's is
	 * not asked again. Anything else that such an allow admits is
	 * dropped: no proxy can take it here (policy_check_l4). */
	proxied = from_proxy(skb) || from_ingress_proxy(skb);
	if ((proxied ? proxy_owns(ct, f.ct_status) : f.ct_status == CT_NEW) &&
	    !(NETKIT && lb4_is_refusal(skb, &f.p, ENDPOINT_IPV4))) {
		if (POLICY_INGRESS && !from_ingress_proxy(skb)) {
			if (from_proxy(skb))
				ret = policy_check(skb, &f, ENDPOINT_ID, DIR_INGRESS, f.src_id, f.p.saddr);
			else
				ret = policy_check_l4(skb, &f, ENDPOINT_ID, DIR_INGRESS, f.src_id, f.p.saddr);
			if (ret < 0)
				return drop(skb, &f, ret);
		}
		ret = ct_create(&f.p, f.src_id, ENDPOINT_IDENTITY, 0, proxied ? CT_F_PROXY_UPSTREAM : 0, 0, 0, 0);
		if (ret < 0)
			return drop(skb, &f, ret);
	}
	/* A service's reply that crossed the stack (legacy routing), or came
	 * from a netkit pod's transmit, is translated back here. */
	ret = lb4_to_client(skb, &f.p, ct, f.ct_status);
	if (ret < 0)
		return drop(skb, &f, ret);
	forwarded(skb, &f, TRACE_TO_LXC);
	return TC_ACT_OK;
}

char __license[] SEC("license") = "Dual BSD/GPL";
