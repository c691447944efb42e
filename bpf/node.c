// SPDX-License-Identifier: Apache-2.0
/* Programs on a node's own devices: the uplink and the VXLAN device. One
 * object per node, with the node's constants from lib/common.h. */
#include "lib/common.h"
#include "lib/events.h"
#include "lib/forward.h"
#include "lib/lb.h"
#include "lib/ingress.h"
#include "lib/l2responder.h"
#include "lib/nat.h"
#include "lib/nodeport.h"
#include "lib/packet.h"
#include "lib/proxy.h"

static __always_inline int drop_spoofed(struct __sk_buff *skb, struct flow *f)
{
	if (!f->src_id)
		f->src_id = IDENTITY_WORLD;
	return drop(skb, f, DROP_INVALID_SIP);
}

/* from_network delivers packets for local pods and serves clients from
 * outside of north-south frontends (lib/nodeport.h); everything else
 * belongs to the node's stack. src_id is the sender's identity when the
 * VNI carried it, tunnel the sending node; both are 0 in native routing,
 * where replies to masqueraded pods are also translated back here.
 * Replies of remote backends to clients from outside come back either
 * way. */
static __always_inline int from_network(struct __sk_buff *skb, __u32 src_id, __u32 tunnel,
					enum trace_point point)
{
	struct flow f = { .src_id = src_id, .direction = DIR_INGRESS };
	struct endpoint_info *ep;
	__u16 rev_nat = 0;
	int ret;

	ret = parse_ipv4(skb, &f.p);
	if (ret == PARSE_NOT_IPV4) {
		/* ARP on the uplink may ask for an address this node
		 * announces; through the tunnel it asks nothing of ours. */
		if (point == TRACE_FROM_NETWORK && f.p.eth_proto_arp)
			return l2_respond(skb);
		return TC_ACT_OK;
	}
	/* Nothing this node sends comes back in from the network: not from
	 * the hairpin address (a pod reaching itself through a service,
	 * which never leaves its node), not from the node's address, not
	 * from one of its endpoints' (checked below, where the packet goes).
	 * Such a packet is spoofed: judged by its source it would pass as
	 * the host or as a local pod. */
	if (f.p.saddr == HAIRPIN_IPV4 || f.p.saddr == NODE_IPV4)
		return drop_spoofed(skb, &f);
	if (ret == 0) {
		frag_record(&f.p);
		ret = snat_ingress(skb, &f.p, !MASQUERADE || tunnel, &rev_nat);
		if (ret < 0)
			return drop(skb, &f, ret);
		if (rev_nat)
			return nodeport_reply(skb, &f, rev_nat);
		/* Clients from outside arrive on the uplink, never through
		 * the tunnel: point, a constant, keeps the code out of
		 * cil_from_overlay. */
		if (point == TRACE_FROM_NETWORK) {
			ret = nodeport_ingress(skb, &f);
			if (ret != NP_CONTINUE)
				return ret;
		}
		ret = 0;
	}
	ep = endpoint_lookup4(f.p.daddr);
	/* Legacy routing: local pods are reached through the stack, whose
	 * netfilter undoes what it translated (kube-proxy's DNAT of a Service
	 * address); the pod's to-container judges the packet. But for a
	 * connection to the proxy, which only a tc ingress can hand over. */
	if (ep && LEGACY_ROUTING && ret == 0 && legacy_to_proxy(&f, ep))
		return deliver_ingress(skb, &f, ep, tunnel);
	if (!ep || LEGACY_ROUTING) {
		/* The stack could forward a local pod's address into the
		 * tunnel with that pod's identity, or deliver it to a pod. */
		if (endpoint_lookup4(f.p.saddr))
			return drop_spoofed(skb, &f);
		if (trace_wanted(&f, point))
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
			f.src_id = sender_identity4(f.p.saddr);
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

/* tunnel_identity_allowed says whether a remote node may name id as a
 * packet's source: not the unknown identity, and none that only the node
 * itself assigns (host, unmanaged, init, node-local CIDR identities). The
 * sending node presents its own traffic as remote-node. */
static __always_inline int tunnel_identity_allowed(__u32 id)
{
	switch (id) {
	case IDENTITY_ANY:
	case IDENTITY_HOST:
	case IDENTITY_UNMANAGED:
	case IDENTITY_INIT:
		return 0;
	}
	return !(id & IDENTITY_SCOPE_LOCAL);
}

/* overlay_ingress takes the sender's identity from the VNI: the sending
 * node knew it, and it needs no ipcache entry here. Only nodes of the
 * cluster may send: anything can reach the VXLAN port (a pod can, through
 * the node's address), and the VNI would otherwise let it claim any
 * identity. key->tunnel_id is 0 when the packet had no tunnel key. */
static __always_inline int overlay_ingress(struct __sk_buff *skb, const struct bpf_tunnel_key *key)
{
	struct flow f = { .direction = DIR_INGRESS };
	struct ipcache_info *sender;
	__u32 outer = bpf_htonl(key->remote_ipv4);
	int ret = 0;

	if (!key->tunnel_id)
		return drop(skb, &f, DROP_NO_TUNNEL_KEY);
	sender = ipcache_lookup4(outer);
	if (!sender || sender->identity != IDENTITY_REMOTE_NODE)
		ret = DROP_UNKNOWN_SENDER;
	else if (!tunnel_identity_allowed(key->tunnel_id))
		ret = DROP_INVALID_IDENTITY;
	if (ret) {
		/* The event names the inner packet and the claimed identity. */
		f.src_id = key->tunnel_id;
		parse_ipv4(skb, &f.p);
		return drop(skb, &f, ret);
	}
	return from_network(skb, key->tunnel_id, outer, TRACE_FROM_OVERLAY);
}

SEC("tc")
int cil_from_overlay(struct __sk_buff *skb)
{
	struct bpf_tunnel_key key = {};

	if (bpf_skb_get_tunnel_key(skb, &key, sizeof(key), 0) < 0)
		key.tunnel_id = 0;
	return overlay_ingress(skb, &key);
}

/* host_fenced says whether the node sends a packet to a frontend whose
 * source ranges keep the node out: socket-level balancing left it
 * untranslated (sock4_fenced), and it is dropped here, silently, as
 * kube-proxy's firewall drops it. */
static __always_inline int host_fenced(const struct pkt *p)
{
	struct lb4_service *svc;
	struct lb4_key k;

	if (!lb_l4_proto(p->protocol) || p->later_frag)
		return 0;
	svc = lb4_lookup_service(&k, p->daddr, p->dport, p->protocol, 1);
	return svc && lb4_source_denied(svc, p->saddr);
}

/* cil_to_netdev drops what the node sends to a frontend whose source
 * ranges keep it out (host_fenced), translates back the node's replies as
 * the backend of a north-south frontend (nodeport_host_reply) and the
 * proxy's in a backend's name (proxy_to_nodeport_client), and
 * masquerades, with
 * legacy routing, what local pods send to the world: here, after
 * netfilter, the destination is final (a Service address is already
 * translated to its backend). Only connections the pod opened: a reply
 * to a connection from the world (the API server's pod proxy, a NodePort
 * through kube-proxy) keeps the pod's address, or its client would see
 * an answer from someone it never called. */
SEC("tc")
int cil_to_netdev(struct __sk_buff *skb)
{
	struct flow f = { .direction = DIR_EGRESS };
	struct endpoint_info *ep;
	int ret;

	ret = parse_ipv4(skb, &f.p);
	if (ret == PARSE_NOT_IPV4)
		return TC_ACT_OK;
	if (ret == 0 && f.p.saddr == NODE_IPV4) {
		/* The node's own datagrams: their later fragments need the
		 * ports. */
		frag_record(&f.p);
		if (host_fenced(&f.p)) {
			f.src_id = IDENTITY_HOST;
			return drop(skb, &f, DROP_NOT_IN_SRC_RANGE);
		}
		ret = nodeport_host_reply(skb, &f.p);
		if (ret < 0) {
			f.src_id = IDENTITY_HOST;
			return drop(skb, &f, ret);
		}
		return TC_ACT_OK;
	}
	if (ret == 0 && from_proxy(skb))
		return proxy_upstream_out(skb, &f);
	if (ret == 0) {
		ret = proxy_to_nodeport_client(skb, &f.p);
		if (ret < 0)
			return drop(skb, &f, ret);
		if (ret)
			return TC_ACT_OK;
	}
	if (!MASQUERADE || !LEGACY_ROUTING || ret != 0)
		return TC_ACT_OK;
	ep = endpoint_lookup4(f.p.saddr);
	if (!ep || !identity_is_world(identity_of4(f.p.daddr)) || ct_is_reply(&f.p))
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
	struct ipcache_info *info;
	struct endpoint_info *ep;
	struct bpf_tunnel_key key = { .tunnel_id = IDENTITY_REMOTE_NODE, .tunnel_ttl = 64 };
	struct flow f = { .direction = DIR_EGRESS };

	if (skb->mark == MARK_ENCAPSULATED) {
		skb->mark = 0;
		return TC_ACT_OK;
	}
	if (parse_ipv4(skb, &f.p) != 0)
		return TC_ACT_OK;
	/* The node's own datagrams: their later fragments need the ports. */
	frag_record(&f.p);
	info = ipcache_lookup4(f.p.daddr);
	if (!info || !info->tunnel_ipv4)
		return TC_ACT_OK;
	if (from_proxy(skb) && proxy_upstream_out(skb, &f) != TC_ACT_OK)
		return TC_ACT_SHOT;
	ep = endpoint_lookup4(f.p.saddr);
	if (ep)
		key.tunnel_id = ep->identity;
	key.remote_ipv4 = bpf_ntohl(info->tunnel_ipv4);
	bpf_skb_set_tunnel_key(skb, &key, sizeof(key), BPF_F_ZERO_CSUM_TX);
	return TC_ACT_OK;
}

char __license[] SEC("license") = "Dual BSD/GPL";
