// SPDX-License-Identifier: Apache-2.0
/* Programs on a node's own devices: the uplink and the VXLAN device. One
 * object per node, with the node's constants from lib/common.h. */
#include "lib/common.h"
#include "lib/events.h"
#include "lib/forward.h"
#include "lib/ingress.h"
#include "lib/nat.h"
#include "lib/packet.h"

/* from_network delivers packets for local pods; everything else belongs
 * to the node's stack. src_id is the sender's identity when the VNI
 * carried it, tunnel the sending node; both are 0 in native routing, where
 * replies to masqueraded pods are also translated back here. */
static __always_inline int from_network(struct __sk_buff *skb, __u32 src_id, __u32 tunnel, __u8 point)
{
	struct flow f = { .src_id = src_id, .direction = DIR_INGRESS };
	struct endpoint_info *ep;
	int ret;

	ret = parse_ipv4(skb, &f.p);
	if (ret == PARSE_NOT_IPV4)
		return TC_ACT_OK;
	if (MASQUERADE && ret == 0 && !tunnel) {
		ret = snat_ingress(skb, &f.p);
		if (ret < 0)
			return drop(skb, &f, ret);
		ret = 0;
	}
	ep = endpoint_lookup4(f.p.daddr);
	/* Legacy routing: local pods are reached through the stack, whose
	 * netfilter undoes what it translated (kube-proxy's DNAT of a Service
	 * address); the pod's to-container judges the packet. */
	if (!ep || LEGACY_ROUTING) {
		if (TRACE_ENABLED)
			emit_event(skb, &f, EVENT_TRACE, point, 0);
		/* Pods do not know the VXLAN device's MAC: the inner frame
		 * still names the sender's gateway, and the stack would
		 * discard it as meant for another host. */
		if (tunnel)
			bpf_skb_change_type(skb, PACKET_HOST);
		return TC_ACT_OK;
	}
	if (ret < 0) {
		if (!f.src_id)
			f.src_id = identity_of4(f.p.saddr);
		return drop(skb, &f, ret);
	}
	return deliver_ingress(skb, &f, ep, tunnel);
}

/* cil_from_netdev: native routing, where the ipcache names the sender. */
SEC("tc")
int cil_from_netdev(struct __sk_buff *skb)
{
	return from_network(skb, 0, 0, TRACE_FROM_NETWORK);
}

/* from_overlay takes the sender's identity from the VNI: the sending node
 * knew it, and it needs no ipcache entry here. */
static __always_inline int from_overlay(struct __sk_buff *skb)
{
	struct bpf_tunnel_key key = {};

	if (bpf_skb_get_tunnel_key(skb, &key, sizeof(key), 0) < 0 || !key.tunnel_id) {
		struct flow f = { .direction = DIR_INGRESS };

		return drop(skb, &f, DROP_NO_TUNNEL_KEY);
	}
	return from_network(skb, key.tunnel_id, bpf_htonl(key.remote_ipv4), TRACE_FROM_OVERLAY);
}

SEC("tc")
int cil_from_overlay(struct __sk_buff *skb)
{
	return from_overlay(skb);
}

/* cil_to_netdev masquerades, with legacy routing, what local pods send to
 * the world: here, after netfilter, the destination is final (a Service
 * address is already translated to its backend). */
SEC("tc")
int cil_to_netdev(struct __sk_buff *skb)
{
	struct flow f = { .direction = DIR_EGRESS };
	struct endpoint_info *ep;
	int ret;

	if (!MASQUERADE || !LEGACY_ROUTING || parse_ipv4(skb, &f.p) != 0)
		return TC_ACT_OK;
	ep = endpoint_lookup4(f.p.saddr);
	if (!ep || identity_of4(f.p.daddr) != IDENTITY_WORLD)
		return TC_ACT_OK;
	ret = snat_egress(skb, &f.p);
	if (ret < 0) {
		f.src_id = ep->identity;
		f.src_ep = ep->ep_id;
		f.dst_id = IDENTITY_WORLD;
		return drop(skb, &f, ret);
	}
	return TC_ACT_OK;
}

/* cil_to_overlay gives a tunnel key to what the stack routes to remote
 * pods: the node's own packets, and pod packets the stack forwarded
 * (after kube-proxy's translation), which keep their pod's identity. Pod
 * packets encapsulated by cil_from_container pass untouched. */
SEC("tc")
int cil_to_overlay(struct __sk_buff *skb)
{
	struct pkt p = {};
	struct ipcache_info *info;
	struct endpoint_info *ep;
	struct bpf_tunnel_key key = { .tunnel_id = IDENTITY_REMOTE_NODE, .tunnel_ttl = 64 };

	if (skb->mark == MARK_ENCAPSULATED) {
		skb->mark = 0;
		return TC_ACT_OK;
	}
	if (parse_ipv4(skb, &p) != 0)
		return TC_ACT_OK;
	info = ipcache_lookup4(p.daddr);
	if (!info || !info->tunnel_ipv4)
		return TC_ACT_OK;
	ep = endpoint_lookup4(p.saddr);
	if (ep)
		key.tunnel_id = ep->identity;
	key.remote_ipv4 = bpf_ntohl(info->tunnel_ipv4);
	bpf_skb_set_tunnel_key(skb, &key, sizeof(key), BPF_F_ZERO_CSUM_TX);
	return TC_ACT_OK;
}

char __license[] SEC("license") = "Dual BSD/GPL";
