// SPDX-License-Identifier: Apache-2.0
/* Socket-level service balancing for the processes of one cgroup (the
 * node's): a connect or send to a frontend is aimed at a backend before
 * the socket has a route or a packet exists, so the packets carry the
 * backend's address from the first and no program on a device translates
 * them. The socket keeps seeing the frontend as its peer: getpeername and
 * the source of received datagrams are translated back.
 *
 * Every frontend found is served, whatever its flags: a ClusterIP, an
 * ExternalIP, a HostPort at an address of this node (the agent writes
 * them so; at the loopback, for the node's own namespace only), and a
 * NodePort at the address of any node (lb4_lookup_any_node), so that
 * policy judges the backend. A frontend with source ranges is translated
 * here only for the node's processes that the ranges admit (sock4_fenced).
 * Clients are internal: a frontend with two scopes serves them from its internal one.
 * Only TCP and UDP: SCTP associations may move between addresses the
 * programs do not see.
 *
 * One object per node, loaded against the node's maps; the iterator at the
 * end is loaded on its own, with the backend it looks for as constants. */
#include <asm-generic/errno.h>

#include "lib/common.h"
#include "lib/lb.h"

/* HOST_NETNS_COOKIE is the cookie of the node's network namespace: a
 * frontend at a loopback address (a HostPort at hostIP 127.0.0.1, as
 * portmap maps it) serves the node's processes only. A pod's loopback is
 * its own, though the pod's processes are in the cgroup too. */
volatile const __u64 HOST_NETNS_COOKIE = 0;

static __always_inline int sock4_loopback_elsewhere(struct bpf_sock_addr *ctx, __u32 daddr)
{
	return (bpf_ntohl(daddr) >> 24) == 127 && bpf_get_netns_cookie(ctx) != HOST_NETNS_COOKIE;
}

/* sock4_proto is the balanced protocol of the socket, or 0. */
static __always_inline __u8 sock4_proto(const struct bpf_sock_addr *ctx)
{
	switch (ctx->protocol) {
	case IPPROTO_TCP:
		return IPPROTO_TCP;
	case IPPROTO_UDP:
		return IPPROTO_UDP;
	}
	return 0;
}

/* sock4_trace records a call that balancing sees, for Hubble: at
 * SOCK_XLATE_PRE_FWD aimed at the frontend, at SOCK_XLATE_POST_FWD at the
 * backend it was translated to, both naming the service. The socket's
 * own address is not known before the call binds it: its network
 * namespace names the caller. */
static __always_inline void sock4_trace(struct bpf_sock_addr *ctx, enum sock_xlate_point point, __u32 daddr,
					__u16 dport, __u8 proto, __u16 rev_nat)
{
	struct event *e;

	if (!TRACE_ENABLED)
		return;
	e = bpf_ringbuf_reserve(&cilium_events, sizeof(*e), 0);
	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->ktime = bpf_ktime_get_ns();
	__builtin_memcpy(e->daddr, &daddr, 4);
	e->dport = dport;
	e->type = EVENT_TRACE_SOCK;
	e->subtype = point;
	e->protocol = proto;
	e->family = FAMILY_INET;
	e->rev_nat = rev_nat;
	e->netns_cookie = bpf_get_netns_cookie(ctx);
	bpf_ringbuf_submit(e, 0);
}

/* sock4_fenced says whether a frontend with source ranges is left to
 * the packets' programs rather than translated here. A pod's call always
 * is: its address, by which the ranges judge it, is not known before the
 * call binds the socket, and its device's program (lb4_local) judges the
 * packet. The node's own processes are judged here by their socket's
 * address, the node's when it is not bound (or bound to the frontend
 * itself, as kube-proxy lets the node through when a range holds its
 * address): a client the ranges keep out goes on untranslated, and
 * cil_to_netdev drops its packets. */
static __always_inline int sock4_fenced(struct bpf_sock_addr *ctx, const struct lb4_service *svc, __u32 daddr)
{
	struct bpf_sock *sk;
	__u32 saddr = 0;

	if (!(svc->flags & LB_F_SOURCE_RANGE))
		return 0;
	if (bpf_get_netns_cookie(ctx) != HOST_NETNS_COOKIE)
		return 1;
	sk = ctx->sk;
	if (sk)
		saddr = sk->src_ip4;
	if (!saddr || saddr == daddr)
		saddr = NODE_IPV4;
	return lb4_source_denied(svc, saddr);
}

/* sock4_forward aims a connect or send at a backend when its destination
 * is a frontend. It returns what the hook returns: 1 lets the call go on,
 * 0 fails it with the error set by bpf_set_retval. */
static __always_inline int sock4_forward(struct bpf_sock_addr *ctx)
{
	struct lb4_sock_rev_key rk = {};
	struct lb4_sock_rev rv = {};
	struct lb4_service *svc;
	struct lb4_backend *be;
	struct lb4_key key;
	__u16 dport = (__u16)ctx->user_port;
	__u32 daddr = ctx->user_ip4;
	__u8 proto = sock4_proto(ctx);
	__u32 id;

	if (!proto || sock4_loopback_elsewhere(ctx, daddr))
		return 1;
	svc = lb4_lookup_local(&key, daddr, dport, proto, 1);
	if (!svc)
		return 1;
	if (sock4_fenced(ctx, svc, daddr))
		return 1;
	sock4_trace(ctx, SOCK_XLATE_PRE_FWD, daddr, dport, proto, svc->rev_nat_index);
	/* Affinity follows the client's network namespace: every process of
	 * the node shares one, as they share the node's address. */
	id = lb4_select(&key, svc, bpf_get_netns_cookie(ctx), 1, 0);
	be = id ? lb4_lookup_backend(id) : NULL;
	if (!be) {
		/* Nothing serves: refuse now, as a host with no listener
		 * would, rather than let the client wait for a SYN that no
		 * one answers. */
		bpf_set_retval(-ECONNREFUSED);
		return 0;
	}
	rk.cookie = bpf_get_socket_cookie(ctx);
	rk.address = be->address;
	rk.port = be->port;
	rv.address = daddr;
	rv.port = dport;
	rv.rev_nat_index = svc->rev_nat_index;
	/* Without its reverse entry the socket would see the backend as
	 * its peer and drop replies it matches by source: better to fail
	 * the call than to connect half-translated. */
	if (bpf_map_update_elem(&cilium_lb4_reverse_sk, &rk, &rv, BPF_ANY) < 0) {
		bpf_set_retval(-ENOMEM);
		return 0;
	}
	ctx->user_ip4 = be->address;
	ctx->user_port = be->port;
	sock4_trace(ctx, SOCK_XLATE_POST_FWD, be->address, be->port, proto, svc->rev_nat_index);
	return 1;
}

/* sock4_reverse shows the frontend in place of the backend a translated
 * socket talks to. An entry whose frontend's reverse NAT index names
 * another address by now (the service went, its index was reused) is
 * stale: it goes, and the address stays as it is. */
static __always_inline void sock4_reverse(struct bpf_sock_addr *ctx)
{
	struct lb4_sock_rev_key rk = {};
	struct lb4_reverse_nat *rn;
	struct lb4_sock_rev *rv;
	__u16 index;

	if (!sock4_proto(ctx))
		return;
	rk.cookie = bpf_get_socket_cookie(ctx);
	rk.address = ctx->user_ip4;
	rk.port = (__u16)ctx->user_port;
	rv = bpf_map_lookup_elem(&cilium_lb4_reverse_sk, &rk);
	if (!rv)
		return;
	index = rv->rev_nat_index;
	rn = bpf_map_lookup_elem(&cilium_lb4_reverse_nat, &index);
	/* A NodePort at any node's address has no address of its own. */
	if (!rn || (rn->address && rn->address != rv->address) || rn->port != rv->port) {
		bpf_map_delete_elem(&cilium_lb4_reverse_sk, &rk);
		return;
	}
	ctx->user_ip4 = rv->address;
	ctx->user_port = rv->port;
}

/* cil_sock4_connect: connect() of TCP and UDP sockets. */
SEC("cgroup/connect4")
int cil_sock4_connect(struct bpf_sock_addr *ctx)
{
	return sock4_forward(ctx);
}

/* cil_sock4_sendmsg: sendto()/sendmsg() with an address, on UDP sockets
 * (connected ones send without one and were translated at connect). */
SEC("cgroup/sendmsg4")
int cil_sock4_sendmsg(struct bpf_sock_addr *ctx)
{
	return sock4_forward(ctx);
}

/* cil_sock4_recvmsg: the source address recvfrom()/recvmsg() report. */
SEC("cgroup/recvmsg4")
int cil_sock4_recvmsg(struct bpf_sock_addr *ctx)
{
	sock4_reverse(ctx);
	return 1;
}

/* cil_sock4_getpeername: getpeername() of connected sockets. */
SEC("cgroup/getpeername4")
int cil_sock4_getpeername(struct bpf_sock_addr *ctx)
{
	sock4_reverse(ctx);
	return 1;
}

/* The kernel's socket structures, as far as the iterator reads them. The
 * loader relocates the fields by name against the running kernel's BTF,
 * so only names and types matter here, not layouts. */
struct sock_common {
	__u32 skc_daddr;
	__u16 skc_dport;
	unsigned short skc_family;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct inet_sock {
	struct sock sk;
} __attribute__((preserve_access_index));

struct udp_sock {
	struct inet_sock inet;
} __attribute__((preserve_access_index));

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

/* The backend whose sockets cil_sock4_destroy_udp ends. */
volatile const __u32 DESTROY_ADDRESS = 0; /* network order */
volatile const __u16 DESTROY_PORT = 0;    /* network order */

/* cil_sock4_destroy_udp ends the UDP sockets of the iterating namespace
 * that socket-level balancing connected to a backend that went away: a
 * connected socket never passes connect4 again, so without this it would
 * keep sending into the void. A socket connected to the backend directly
 * (no reverse entry) is left alone. The socket's next receive fails with
 * ECONNABORTED, and it may connect again, to a live backend. Each ended
 * socket's cookie is written to the iterator's output, for the count. */
SEC("iter/udp")
int cil_sock4_destroy_udp(struct bpf_iter__udp *ctx)
{
	struct sock *sk = (struct sock *)ctx->udp_sk;
	struct lb4_sock_rev_key rk = {};

	if (!sk)
		return 0;
	if (sk->__sk_common.skc_family != FAMILY_INET || sk->__sk_common.skc_daddr != DESTROY_ADDRESS ||
	    sk->__sk_common.skc_dport != DESTROY_PORT)
		return 0;
	rk.cookie = bpf_get_socket_cookie(sk);
	rk.address = DESTROY_ADDRESS;
	rk.port = DESTROY_PORT;
	if (!bpf_map_lookup_elem(&cilium_lb4_reverse_sk, &rk))
		return 0;
	if (bpf_sock_destroy((struct sock_common *)sk))
		return 0;
	bpf_map_delete_elem(&cilium_lb4_reverse_sk, &rk);
	bpf_seq_write(ctx->meta->seq, &rk.cookie, sizeof(rk.cookie));
	return 0;
}

char __license[] SEC("license") = "Dual BSD/GPL";
