/* SPDX-License-Identifier: Apache-2.0 */
/* The layer-7 proxy's side of the datapath. A connection that an allow
 * with layer-7 rules admits goes to the proxy on the node, which keeps
 * its original destination: each packet is given to the proxy's socket
 * (bpf_sk_assign, from a tc ingress) and marked for the node's stack,
 * whose policy routing delivers marked packets locally. The proxy sends
 * upstream from the client's own address, marked, so that the datapath
 * judges that traffic as the client's (egress), or as already judged by
 * the server's ingress rules (ingress), and sends its replies back to
 * the proxy (CT_F_PROXY_UPSTREAM). */
#pragma once

#include "common.h"
#include "conntrack.h"
#include "events.h"
#include "forward.h"
#include "nat.h"

/* proxy_assign_tcp gives the packet to the proxy's socket of its
 * connection, or, for a connection the proxy has not accepted yet, to
 * its listening socket on port. A socket of the exact tuple that is
 * listening (another program's, bound to the destination's port) or in
 * TIME_WAIT is not the proxy's connection. */
static __always_inline int proxy_assign_tcp(struct __sk_buff *skb, struct bpf_sock_tuple *t, __u16 port)
{
	struct bpf_sock *sk;
	int ret;

	sk = bpf_skc_lookup_tcp(skb, t, sizeof(t->ipv4), BPF_F_CURRENT_NETNS, 0);
	if (sk) {
		if (sk->state != BPF_TCP_LISTEN && sk->state != BPF_TCP_TIME_WAIT) {
			ret = bpf_sk_assign(skb, sk, 0);
			bpf_sk_release(sk);
			return ret ? -DROP_PROXY_SET_FAILED : 0;
		}
		bpf_sk_release(sk);
	}
	t->ipv4.saddr = 0;
	t->ipv4.sport = 0;
	t->ipv4.daddr = 0;
	t->ipv4.dport = bpf_htons(port);
	sk = bpf_skc_lookup_tcp(skb, t, sizeof(t->ipv4), BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return -DROP_PROXY_LOOKUP_FAILED;
	if (sk->state != BPF_TCP_LISTEN) {
		bpf_sk_release(sk);
		return -DROP_PROXY_LOOKUP_FAILED;
	}
	ret = bpf_sk_assign(skb, sk, 0);
	bpf_sk_release(sk);
	return ret ? -DROP_PROXY_SET_FAILED : 0;
}

/* proxy_assign_udp gives the datagram to the proxy's socket on port,
 * which reads the original destination from the datagram. */
static __always_inline int proxy_assign_udp(struct __sk_buff *skb, struct bpf_sock_tuple *t, __u16 port)
{
	struct bpf_sock *sk;
	int ret;

	t->ipv4.daddr = 0;
	t->ipv4.dport = bpf_htons(port);
	sk = bpf_sk_lookup_udp(skb, t, sizeof(t->ipv4), BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return -DROP_PROXY_LOOKUP_FAILED;
	ret = bpf_sk_assign(skb, sk, 0);
	bpf_sk_release(sk);
	return ret ? -DROP_PROXY_SET_FAILED : 0;
}

/* redirect_to_proxy sends f's packet to the proxy on port; the caller
 * returns what it returns. Only from a tc ingress. A packet from the
 * tunnel still names the sending pod's gateway MAC, which the stack
 * would take for another host's. */
static __always_inline int redirect_to_proxy(struct __sk_buff *skb, struct flow *f, __u16 port)
{
	struct bpf_sock_tuple t = {
		.ipv4 = {
			.saddr = f->p.saddr,
			.daddr = f->p.daddr,
			.sport = f->p.sport,
			.dport = f->p.dport,
		},
	};
	int ret;

	switch (f->p.protocol) {
	case IPPROTO_TCP:
		ret = proxy_assign_tcp(skb, &t, port);
		break;
	case IPPROTO_UDP:
		ret = proxy_assign_udp(skb, &t, port);
		break;
	default:
		ret = -DROP_PROXY_UNKNOWN_PROTO;
	}
	if (ret < 0)
		return drop(skb, f, ret);
	bpf_skb_change_type(skb, PACKET_HOST);
	skb->mark = MARK_TO_PROXY;
	forwarded(skb, f, TRACE_TO_PROXY);
	return TC_ACT_OK;
}

/* from_proxy says whether the node's proxy sent the packet upstream on
 * behalf of a local client (egress). */
static __always_inline int from_proxy(const struct __sk_buff *skb)
{
	return (skb->mark & MARK_MAGIC_MASK) == MARK_PROXY_EGRESS;
}

/* from_ingress_proxy says whether the node's proxy sent the packet to a
 * local server whose ingress rules it judged. */
static __always_inline int from_ingress_proxy(const struct __sk_buff *skb)
{
	return (skb->mark & MARK_MAGIC_MASK) == MARK_PROXY_INGRESS;
}

/* to_proxy_upstream hands a reply to the proxy's upstream connection to
 * the node's stack, which delivers it to the proxy's socket of that
 * connection. A reply from the tunnel still names the sending pod's
 * gateway MAC, which the stack would take for another host's. */
static __always_inline int to_proxy_upstream(struct __sk_buff *skb, struct flow *f)
{
	bpf_skb_change_type(skb, PACKET_HOST);
	skb->mark = MARK_TO_PROXY;
	forwarded(skb, f, TRACE_TO_PROXY);
	return TC_ACT_OK;
}

/* proxy_owns says whether the proxy's packet p, found as ct_status with
 * entry ct, needs an entry of its own: none yet, or one of another
 * connection with the same tuple. The proxy's upstream socket gets its
 * port from the node's namespace, which knows nothing of the ports a pod
 * used in its own: an entry left by the pod's earlier connection (one the
 * pod closed, or a UDP query's) would send the upstream's replies into
 * the pod. The upstream takes the tuple over; the pod gets it back once
 * the upstream's socket is gone (proxy_upstream_live), and until then its
 * packets on it drop, never bypassing the proxy. */
static __always_inline int proxy_owns(const struct ct_entry *ct, __u8 ct_status)
{
	return ct_status == CT_NEW ||
	       (ct_status == CT_ESTABLISHED && ct && !(ct->flags & CT_F_PROXY_UPSTREAM));
}

/* proxy_upstream_live says whether the proxy's upstream socket of p's
 * tuple (p sent by the endpoint whose address the proxy uses) is still
 * open in the node's namespace: looked up as a packet from the peer to
 * it would be. */
static __always_inline int proxy_upstream_live(struct __sk_buff *skb, const struct pkt *p)
{
	struct bpf_sock_tuple t = {
		.ipv4 = { .saddr = p->daddr, .daddr = p->saddr, .sport = p->dport, .dport = p->sport },
	};
	struct bpf_sock *sk;
	int live;

	if (p->protocol == IPPROTO_TCP) {
		sk = bpf_skc_lookup_tcp(skb, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS, 0);
		if (!sk)
			return 0;
		live = sk->state != BPF_TCP_LISTEN;
		bpf_sk_release(sk);
		return live;
	}
	if (p->protocol == IPPROTO_UDP) {
		sk = bpf_sk_lookup_udp(skb, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS, 0);
		if (!sk)
			return 0;
		bpf_sk_release(sk);
		return 1;
	}
	return 0;
}

/* proxy_upstream_out tracks what the proxy sends upstream off the node,
 * from a local endpoint's address, as it leaves (the uplink's or the
 * VXLAN device's egress): the replies then go back to the proxy
 * (deliver_ingress), and a connection to the world is masqueraded, as
 * the endpoint's own would be. The proxy's packets from any other
 * address are the node's own. */
static __always_inline int proxy_upstream_out(struct __sk_buff *skb, struct flow *f)
{
	struct endpoint_info *ep = endpoint_lookup4(f->p.saddr);
	struct ipcache_info *info;
	struct ct_entry *ct;
	int ret, snat;

	if (!ep)
		return TC_ACT_OK;
	f->src_id = ep->identity;
	f->src_ep = ep->ep_id;
	info = ipcache_lookup4(f->p.daddr);
	f->dst_id = info ? info->identity : IDENTITY_WORLD;
	f->ct_status = ct_lookup(skb, &f->p, &ct, &f->report);
	if (proxy_owns(ct, f->ct_status)) {
		snat = MASQUERADE && identity_is_world(f->dst_id);
		ret = ct_create(&f->p, ep->identity, f->dst_id, 0,
				CT_F_PROXY_UPSTREAM | CT_F_NO_DST_EP | (snat ? CT_F_SNAT : 0), 0, 0, 0);
		if (ret < 0)
			return drop(skb, f, ret);
	} else {
		snat = ct && (ct->flags & CT_F_SNAT) && f->ct_status == CT_ESTABLISHED;
	}
	if (snat) {
		ret = snat_egress(skb, &f->p);
		if (ret < 0)
			return drop(skb, f, ret);
	}
	return TC_ACT_OK;
}
