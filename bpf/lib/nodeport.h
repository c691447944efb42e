/* SPDX-License-Identifier: Apache-2.0 */
/* North-south services: a client outside the node reaching a NodePort, an
 * ExternalIP, a LoadBalancer address or a pod's HostPort on the uplink.
 * The frontend is looked up in its external scope; only frontends of
 * those kinds serve from outside (a ClusterIP does not, as behind
 * kube-proxy), and the backend is picked as for a local client
 * (lb4_backend_of: the service entry in conntrack, affinity by the
 * client's address), or, at a frontend with LB_F_MAGLEV, from its Maglev
 * table by a hash of the flow, so that every node that the network sends
 * the flow to picks the same backend.
 *
 * - A local backend gets the packet with only its destination translated:
 *   the client's address is kept, so that ingress policy judges the
 *   client. Its connection is marked CT_F_NODEPORT: the backend's replies
 *   and ICMP errors are translated back as they leave the pod, and routed
 *   out to the client, since no client node will translate them.
 * - A backend in the node's own network (a hostNetwork pod's, at the
 *   node's address) gets it through the stack, translated the same way;
 *   the node's replies are translated back as they leave by the uplink.
 * - A remote backend gets the packet with the source translated too, to
 *   the node's address and a port of the translation range (nat.h), so
 *   that its replies come back here: Cilium's SNAT mode. The translation
 *   is held in cilium_snat4 beside masquerading's, marked with the
 *   service's reverse NAT index; a reply is translated back on both
 *   addresses and routed out to the client. In tunnel mode the packet is
 *   encapsulated with the world identity, as in Cilium: a policy that
 *   keeps the world out of a backend keeps it out through a NodePort of
 *   another node too. In native routing the backend's node sees the
 *   node's address and takes its identity from its ipcache (remote-node).
 * - externalTrafficPolicy: Local (LB_F_LOCAL) and HostPorts serve from
 *   local backends only, never translating the source; without one the
 *   packet drops (DROP_NO_SERVICE), as kube-proxy drops for a Local
 *   service without local endpoints so that a load balancer's health
 *   check moves traffic elsewhere.
 * - Without any backend the client gets an ICMP port unreachable out of
 *   the device the packet came in by, as behind kube-proxy's REJECT.
 * - ICMP errors of a translated flow are translated like the flow in both
 *   directions: from the backend towards the client, and from outside
 *   (the client's host, a router) about the node's replies towards the
 *   backend. An error that quotes no translated flow is left alone.
 * - A frontend with source ranges (loadBalancerSourceRanges) drops the
 *   packets of clients whose address none of them holds
 *   (DROP_NOT_IN_SRC_RANGE), as kube-proxy's firewall drops them.
 * - SCTP reaches local backends only: its CRC32c covers the ports that
 *   the source translation would change. So do the later fragments of a
 *   datagram, which the source translation cannot follow
 *   (DROP_FRAG_NOSUPPORT, as for masquerading).
 *
 * North-south flows bypass the stack in every routing mode: after
 * translation their packets carry the node's own address as source or
 * destination, which the stack would take for a martian. */
#pragma once

#include "common.h"
#include "conntrack.h"
#include "events.h"
#include "forward.h"
#include "ingress.h"
#include "lb.h"
#include "lb_xlate.h"
#include "nat.h"
#include "packet.h"

/* The kinds of frontends that serve clients from outside the node. */
#define LB_F_FROM_OUTSIDE (LB_F_NODEPORT | LB_F_EXTERNAL_IP | LB_F_HOSTPORT | LB_F_LOADBALANCER)

/* nodeport_ingress's answer when the packet is not for a north-south
 * frontend: not a verdict, the caller goes on. */
#define NP_CONTINUE (-1)

/* nodeport_to_remote sends a translated packet towards its remote
 * backend: through the tunnel as the world, or routed. */
static __always_inline int nodeport_to_remote(struct __sk_buff *skb, struct flow *f)
{
	struct ipcache_info *info = ipcache_lookup4(f->p.daddr);

	f->dst_id = info ? info->identity : IDENTITY_WORLD;
	if (TUNNEL_MODE == ROUTING_TUNNEL && info && info->tunnel_ipv4) {
		forwarded(skb, f, TRACE_TO_OVERLAY);
		return redirect_to_tunnel(skb, info->tunnel_ipv4, IDENTITY_WORLD);
	}
	forwarded(skb, f, TRACE_TO_STACK);
	return redirect_routed(skb, &f->p);
}

static __always_inline int nodeport_drop(struct __sk_buff *skb, struct flow *f, int reason)
{
	if (!f->src_id)
		f->src_id = sender_identity4(f->p.saddr);
	return drop(skb, f, reason);
}

/* nodeport_refuse answers a client of a frontend without backends with
 * an ICMP port unreachable out of the receiving device, and counts the
 * packet as DROP_NO_SERVICE. */
static __always_inline int nodeport_refuse(struct __sk_buff *skb, struct flow *f)
{
	if (!f->src_id)
		f->src_id = sender_identity4(f->p.saddr);
	emit_event(skb, f, EVENT_DROP, DROP_NO_SERVICE, 0);
	metrics_add(DROP_NO_SERVICE, f->direction, skb->len);
	if (lb4_no_service(skb, &f->p) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

/* nodeport_icmp_addr replaces an outer address of an ICMP packet, which
 * has no pseudo-header. */
static __always_inline int nodeport_icmp_addr(struct __sk_buff *skb, __u32 off, __u32 old_addr, __u32 new_addr)
{
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, old_addr, new_addr, 4) < 0 ||
	    bpf_skb_store_bytes(skb, off, &new_addr, 4, 0) < 0)
		return -DROP_INVALID;
	return 0;
}

/* nodeport_quote_port replaces a quoted port, moving the ICMP checksum. */
static __always_inline int nodeport_quote_port(struct __sk_buff *skb, __u32 icmp_csum, __u32 off, __u16 old_port,
					       __u16 new_port)
{
	if (bpf_l4_csum_replace(skb, icmp_csum, old_port, new_port, 2) < 0 ||
	    bpf_skb_store_bytes(skb, off, &new_port, 2, 0) < 0)
		return -DROP_INVALID;
	return 0;
}

/* nodeport_icmp_in translates an ICMP error from outside about a reply
 * this node sent a client of an external frontend (the quoted packet
 * went from the frontend to the client) into an error about the
 * backend's packet, and sends it to the backend: the quoted source
 * becomes the backend, the outer destination too, and for a remote
 * backend the quoted destination and the outer source become the node's
 * translation. The service entry names the backend; the flow must be
 * north-south (a NodePort translation, or a local connection marked
 * CT_F_NODEPORT), else the error is left alone. */
static __always_inline int nodeport_icmp_in(struct __sk_buff *skb, struct flow *f)
{
	struct pkt *p = &f->p;
	__u32 inner = p->l4_off + sizeof(struct icmphdr), inner_l4, icmp_csum = p->l4_off + 2;
	__u32 front, client, node = NODE_IPV4;
	struct endpoint_info *ep;
	struct nat4_entry *nat;
	struct lb4_backend *be;
	struct ct4_key ck = {};
	struct nat4_key nk = {};
	struct ct_entry *e;
	struct iphdr ip;
	__u16 ports[2];
	int ret;

	inner_l4 = lb4_icmp_quoted(skb, p, &ip, ports);
	/* An error goes to the quoted packet's sender: the frontend. */
	if (!inner_l4 || ip.saddr != p->daddr)
		return NP_CONTINUE;
	front = ip.saddr;
	client = ip.daddr;
	ck.saddr = client;
	ck.daddr = front;
	ck.sport = ports[1];
	ck.dport = ports[0];
	ck.protocol = ip.protocol;
	ck.flags = CT_KEY_SERVICE;
	e = ct_find(&ck, ct_now());
	be = e ? lb4_lookup_backend(e->backend_id) : 0;
	if (!be)
		return NP_CONTINUE;
	nk.saddr = client;
	nk.daddr = be->address;
	nk.sport = ports[1];
	nk.dport = be->port;
	nk.protocol = ip.protocol;
	nk.dir = DIR_EGRESS;
	nk.rev_nat_index = e->rev_nat_index;
	nat = bpf_map_lookup_elem(&cilium_snat4, &nk);
	if (nat && !nat->rev_nat_index)
		nat = 0;
	if (!nat) {
		ck.daddr = be->address;
		ck.dport = be->port;
		ck.flags = 0;
		e = ct_find(&ck, ct_now());
		if (!e || !(e->flags & CT_F_NODEPORT))
			return NP_CONTINUE;
	}
	ret = nodeport_quote_port(skb, icmp_csum, inner_l4, ports[0], be->port);
	if (ret == 0)
		ret = lb4_quote_addr(skb, icmp_csum, inner, 12, front, be->address);
	if (ret == 0 && nat) {
		ret = nodeport_quote_port(skb, icmp_csum, inner_l4 + 2, ports[1], nat->port);
		if (ret == 0)
			ret = lb4_quote_addr(skb, icmp_csum, inner, 16, client, node);
		if (ret == 0)
			ret = nodeport_icmp_addr(skb, IP_SADDR_OFF, p->saddr, node);
		p->saddr = node;
	}
	if (ret == 0)
		ret = nodeport_icmp_addr(skb, IP_DADDR_OFF, front, be->address);
	if (ret < 0)
		return nodeport_drop(skb, f, ret);
	p->daddr = be->address;
	if (nat)
		return nodeport_to_remote(skb, f);
	ep = endpoint_lookup4(p->daddr);
	if (!ep)
		return nodeport_drop(skb, f, DROP_NO_SERVICE);
	return deliver_ingress(skb, f, ep, 0);
}

/* nodeport_to_host hands a translated packet to a backend in this node's
 * own network (a hostNetwork pod's, at the node's address) through the
 * stack, with the client's address kept as for a local pod. Its
 * connection is marked CT_F_NODEPORT: the replies are translated back as
 * they leave by the uplink (nodeport_host_reply). */
static __always_inline int nodeport_to_host(struct __sk_buff *skb, struct flow *f)
{
	struct ct_entry *ct;
	int ret;

	f->dst_id = IDENTITY_HOST;
	f->ct_status = ct_lookup(skb, &f->p, &ct, &f->report);
	if (f->ct_status == CT_INVALID)
		return nodeport_drop(skb, f, DROP_UNKNOWN_CT);
	if (!f->src_id)
		f->src_id = ct ? ct_sender_identity(ct, f->ct_status) : sender_identity4(f->p.saddr);
	if (f->ct_status == CT_NEW) {
		ret = ct_create(&f->p, f->src_id, IDENTITY_HOST, 0, CT_F_NO_SRC_EP | CT_F_NO_DST_EP | CT_F_NODEPORT,
				f->rev_nat, 0, 0);
		if (ret < 0)
			return nodeport_drop(skb, f, ret);
	} else if (ct && ct->rev_nat_index != f->rev_nat) {
		/* A tuple reused through another frontend. */
		ct->rev_nat_index = f->rev_nat;
		ct->flags |= CT_F_NODEPORT;
	}
	forwarded(skb, f, TRACE_TO_HOST);
	return TC_ACT_OK;
}

/* nodeport_host_reply translates back what the node itself sends out of
 * the uplink as a backend (nodeport_to_host): the reply of a connection
 * marked CT_F_NODEPORT, or an ICMP error quoting one of its packets.
 * Returns 1 when translated, 0 when the packet is no such reply. Only the
 * node's address is looked at: nothing else is a host backend. */
static __always_inline int nodeport_host_reply(struct __sk_buff *skb, struct pkt *p)
{
	struct ct4_key k = {};
	struct ct_entry *e;
	__u64 now;

	if (p->saddr != NODE_IPV4)
		return 0;
	if (p->protocol == IPPROTO_ICMP)
		return icmp_is_error(p->icmp_type) && !p->later_frag ? lb4_rev_nat_icmp(skb, p, CT_F_NODEPORT) : 0;
	if (!lb_l4_proto(p->protocol))
		return 0;
	now = ct_now();
	ct_key_of(p, &k, 1);
	e = ct_find(&k, now);
	if (!e || !e->rev_nat_index || !(e->flags & CT_F_NODEPORT))
		return 0;
	ct_touch(e, p, 1, now);
	return lb4_rev_nat(skb, p, e->rev_nat_index, e->frontend_addr);
}

/* nodeport_ingress serves a packet from outside the node to a frontend
 * of its external scope. It returns a verdict, or NP_CONTINUE when the
 * packet is for no such frontend. */
static __always_inline int nodeport_ingress(struct __sk_buff *skb, struct flow *f)
{
	struct pkt *p = &f->p;
	struct endpoint_info *ep;
	struct lb4_service *svc;
	struct lb4_backend *be;
	struct lb4_key k;
	int ret = 0;

	if (p->protocol == IPPROTO_ICMP && icmp_is_error(p->icmp_type))
		return nodeport_icmp_in(skb, f);
	if (!lb_l4_proto(p->protocol))
		return NP_CONTINUE;
	svc = lb4_lookup_service(&k, p->daddr, p->dport, p->protocol, 0);
	if (!svc || !(svc->flags & LB_F_FROM_OUTSIDE))
		return NP_CONTINUE;
	/* Every packet, not only a connection's first: a client that a
	 * range no longer admits loses its connections too. Dropped
	 * silently, as kube-proxy's firewall drops. */
	if (lb4_source_denied(svc, p->saddr))
		return nodeport_drop(skb, f, DROP_NOT_IN_SRC_RANGE);
	/* A remote backend's connection is tracked by its service entry
	 * only: it says what is news for monitor aggregation. (A local
	 * backend's delivery asks its own conntrack entry.) */
	be = lb4_backend_of(p, &k, svc, &ret, TRACE_ENABLED ? &f->report : 0, 1);
	if (!be) {
		if (svc->flags & LB_F_LOCAL)
			return nodeport_drop(skb, f, DROP_NO_SERVICE);
		return nodeport_refuse(skb, f);
	}
	if (ret < 0)
		return nodeport_drop(skb, f, ret);
	ret = lb4_rewrite(skb, p, 1, p->daddr, be->address, p->dport, be->port);
	if (ret < 0)
		return nodeport_drop(skb, f, ret);
	p->daddr = be->address;
	p->dport = be->port;
	p->policy_port = be->port;
	f->rev_nat = svc->rev_nat_index;
	ep = endpoint_lookup4(p->daddr);
	if (ep)
		return deliver_ingress(skb, f, ep, 0);
	if (p->daddr == NODE_IPV4)
		return nodeport_to_host(skb, f);
	/* Local only: the client's address must reach the backend, and a
	 * HostPort is a local pod's by definition. */
	if (svc->flags & (LB_F_LOCAL | LB_F_HOSTPORT))
		return nodeport_drop(skb, f, DROP_NO_SERVICE);
	if (TRACE_ENABLED && !f->src_id)
		f->src_id = sender_identity4(p->saddr);
	ret = snat_egress_rev(skb, p, f->rev_nat);
	if (ret < 0)
		return nodeport_drop(skb, f, ret);
	return nodeport_to_remote(skb, f);
}

/* nodeport_reply_report says whether the trace of a remote backend's
 * reply, translated back to frontend -> client, has news: by the service
 * entry of its connection, which is keyed in the client's direction. */
static __always_inline __u8 nodeport_reply_report(const struct pkt *p)
{
	struct ct4_key ck = {};
	struct ct_entry *se;
	__u64 now = ct_now();

	ct_key_of(p, &ck, 1);
	ck.flags = CT_KEY_SERVICE;
	se = ct_find(&ck, now);
	return se ? ct_report(se, p, 1, now) : 1;
}

/* nodeport_reply finishes a remote backend's reply, or ICMP error, that
 * snat_ingress translated back to the client: its source becomes the
 * frontend, and it is routed out. A reply whose service is gone drops
 * rather than show the client the backend's address. */
static __always_inline int nodeport_reply(struct __sk_buff *skb, struct flow *f, __u16 rev_nat)
{
	int ret;

	if (f->p.protocol == IPPROTO_ICMP)
		ret = lb4_rev_nat_icmp_index(skb, &f->p, rev_nat, 0);
	else
		ret = lb4_rev_nat(skb, &f->p, rev_nat, 0);
	if (ret == 0)
		ret = -DROP_NAT_NO_MAPPING;
	if (ret < 0)
		return nodeport_drop(skb, f, ret);
	f->rev_nat = rev_nat;
	f->dst_id = IDENTITY_WORLD;
	if (TRACE_ENABLED)
		f->report = nodeport_reply_report(&f->p);
	forwarded(skb, f, TRACE_TO_STACK);
	return redirect_routed(skb, &f->p);
}

/* nodeport_to_client translates what a local backend sends back to a
 * client from outside: a reply of a connection marked CT_F_NODEPORT, or
 * an ICMP error quoting one of its packets. Returns 1 when translated;
 * the caller then routes the packet out. */
static __always_inline int nodeport_to_client(struct __sk_buff *skb, struct pkt *p, const struct ct_entry *ct,
					      __u8 status)
{
	if (status == CT_REPLY && ct && ct->rev_nat_index && (ct->flags & CT_F_NODEPORT))
		return lb4_rev_nat(skb, p, ct->rev_nat_index, ct->frontend_addr);
	if (status == CT_RELATED && p->protocol == IPPROTO_ICMP)
		return lb4_rev_nat_icmp(skb, p, CT_F_NODEPORT);
	return 0;
}

/* proxy_to_nodeport_client translates what the proxy sends back to a
 * client from outside whose connection to a local backend the backend's
 * ingress rules sent to the proxy: it answers from the backend's address,
 * and leaves by the uplink, past the backend's from_container, which
 * translates the backend's own replies. Returns 1 when translated, below
 * 0 a drop reason; 0 for any other packet, which it changes nothing of.
 * Only a socket of the node sends from an endpoint's address with no
 * device it came in by (ingress_ifindex 0): what pods send, forwarded or
 * redirected, costs no lookup here. */
static __always_inline int proxy_to_nodeport_client(struct __sk_buff *skb, struct pkt *p)
{
	const __u16 want = CT_F_TO_PROXY | CT_F_NODEPORT;
	struct endpoint_info *ep;
	struct ct4_key k = {};
	struct ct_entry *ct;
	__u64 now;

	if (skb->ingress_ifindex)
		return 0;
	ep = endpoint_lookup4(p->saddr);
	if (!ep || !(ep->flags & EP_F_INGRESS_ENFORCE))
		return 0;
	now = ct_now();
	ct_key_of(p, &k, 1);
	ct = ct_find(&k, now);
	if (!ct || (ct->flags & want) != want)
		return 0;
	ct_touch(ct, p, 1, now);
	return nodeport_to_client(skb, p, ct, CT_REPLY);
}
