/* SPDX-License-Identifier: Apache-2.0 */
/* Services: frontends (address, port, protocol) and their backends, the
 * reverse translation of replies, and client affinity. The agent writes
 * the maps; the programs on pods' devices, on the node's devices and on
 * the sockets of the node's cgroup translate with them.
 *
 * A frontend is a set of entries in cilium_lb4_services that share the
 * key's address, port, protocol and scope: slot 0 describes the service
 * (how many backends, its reverse-translation index, affinity, flags),
 * slots 1..count name one backend each. A new connection picks a slot;
 * the backend's address and port come from cilium_lb4_backends. Backends
 * that may take no new connection (terminating ones while others serve)
 * are in no slot, but keep their backend entry while connections to
 * them live. */
#pragma once

#include "common.h"

/* A frontend has two scopes when its external clients and its internal
 * ones (local pods and the node itself) are served by different backends:
 * externalTrafficPolicy: Local gives the external scope the node's own
 * backends only, internalTrafficPolicy: Local the internal scope. */
enum lb_scope {
	LB_SCOPE_EXT = 0,
	LB_SCOPE_INT = 1,
};

/* Service flags (slot 0's lb4_service.flags). */
enum lb_flags {
	LB_F_NODEPORT = 1,     /* a NodePort frontend (node addresses) */
	LB_F_EXTERNAL_IP = 2,  /* an ExternalIP frontend */
	LB_F_HOSTPORT = 4,     /* a pod's HostPort */
	LB_F_LOADBALANCER = 8, /* a LoadBalancer ingress address */
	LB_F_AFFINITY = 16,    /* sessionAffinity: ClientIP */
	LB_F_TWO_SCOPES = 32,  /* internal clients look up the LB_SCOPE_INT entries */
	/* Only the node's own backends serve this scope: a client source
	 * address is kept (externalTrafficPolicy: Local), never masqueraded. */
	LB_F_LOCAL = 64,
	/* Only clients whose address is in one of the frontend's source
	 * ranges (cilium_lb4_source_range, by rev_nat_index) may use it:
	 * loadBalancerSourceRanges. */
	LB_F_SOURCE_RANGE = 128,
	/* Clients from outside get their backend from the frontend's
	 * Maglev table (cilium_lb4_maglev) by a hash of the flow, the same
	 * on every node: --bpf-lb-algorithm=maglev. */
	LB_F_MAGLEV = 256,
};

/* Backend states (lb4_backend.state). */
enum lb_backend_state {
	LB_BACKEND_ACTIVE = 0,
	/* Terminating: connections it has go on; it takes a new one only
	 * from a slot, which it holds only while nothing else serves. */
	LB_BACKEND_TERMINATING = 1,
};

struct lb4_key {
	__u32 address; /* network order */
	__u16 dport;   /* network order */
	__u16 backend_slot; /* 0: the service; 1..count: its backends */
	__u8 proto;
	__u8 scope; /* enum lb_scope */
	__u8 pad[2];
};

struct lb4_service {
	__u32 backend_id; /* slot > 0: the backend in this slot */
	__u16 count;      /* slot 0: backends in slots 1..count */
	__u16 rev_nat_index;
	__u32 affinity_timeout; /* slot 0: seconds, with LB_F_AFFINITY */
	__u16 flags;            /* slot 0: enum lb_flags */
	__u16 pad;
};

struct lb4_backend {
	__u32 address; /* network order */
	__u16 port;    /* network order */
	__u8 proto;
	__u8 state; /* enum lb_backend_state */
};

/* What a reply's source is translated back to. */
struct lb4_reverse_nat {
	__u32 address; /* network order */
	__u16 port;    /* network order */
	__u16 pad;
};

/* A client's backend for one service under sessionAffinity: ClientIP.
 * Clients are named by address in tc programs and by their socket's
 * network namespace cookie in socket programs. */
struct lb_affinity_key {
	__u64 client;
	__u16 rev_nat_index;
	__u8 by_cookie;
	__u8 pad[5];
};

struct lb_affinity_value {
	__u64 last_used; /* coarse monotonic nanoseconds */
	__u32 backend_id;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct lb4_key);
	__type(value, struct lb4_service);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct lb4_backend);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u16);
	__type(value, struct lb4_reverse_nat);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_reverse_nat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct lb_affinity_key);
	__type(value, struct lb_affinity_value);
	__uint(max_entries, 65536);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb_affinity SEC(".maps");

/* A frontend's source ranges (LB_F_SOURCE_RANGE): the prefixes of the
 * clients it admits, keyed by its reverse NAT index, which no other
 * frontend has, so that one service's ranges never admit a client to
 * another. The value says nothing: being there admits. */
struct lb4_source_range_key {
	__u32 prefixlen; /* 32 (index and pad) + address prefix */
	__u16 rev_nat_index;
	__u16 pad;
	__u32 address; /* network order */
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lb4_source_range_key);
	__type(value, __u8);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_source_range SEC(".maps");

/* Maglev tables (LB_F_MAGLEV), by reverse NAT index: each is one value of
 * LB_MAGLEV_SIZE backend ids, a prime number of slots that the agent fills
 * from the frontend's backends so that every node fills them alike. A
 * frontend's table is replaced whole, never written in place, so that a
 * lookup sees the old table or the new one. The inner definition is the
 * template; the agent sizes its value (--bpf-lb-maglev-table-size). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u16);
	__uint(max_entries, 65536);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_ARRAY);
		__uint(key_size, sizeof(__u32));
		__uint(value_size, 251 * sizeof(__u32));
		__uint(max_entries, 1);
	});
} cilium_lb4_maglev SEC(".maps");

/* The Maglev tables' slots (the agent sets it to the inner maps' value
 * size, in ids) and the cluster's seed of the flow hash. */
volatile const __u32 LB_MAGLEV_SIZE = 251;
volatile const __u32 LB_MAGLEV_SEED = 0;

/* What a socket that socket-level balancing sent to a backend must see as
 * its peer: the programs on the node's cgroup (sock.c) record it when they
 * translate, and translate back when the socket reads its peer or a
 * datagram's source. Keyed by the socket, so that two sockets of one
 * process may reach the same backend through different frontends. */
struct lb4_sock_rev_key {
	__u64 cookie;  /* bpf_get_socket_cookie */
	__u32 address; /* the backend, network order */
	__u16 port;    /* network order */
	__u16 pad;
};

struct lb4_sock_rev {
	__u32 address; /* the frontend, network order */
	__u16 port;    /* network order */
	__u16 rev_nat_index;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct lb4_sock_rev_key);
	__type(value, struct lb4_sock_rev);
	__uint(max_entries, 65536);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_reverse_sk SEC(".maps");

/* lb4_lookup_service finds the frontend of (address, port, proto) and
 * leaves its key, with the scope that serves the client, in k. internal
 * says the client is a local pod or the node itself. */
static __always_inline struct lb4_service *lb4_lookup_service(struct lb4_key *k, __u32 address, __u16 dport,
							      __u8 proto, int internal)
{
	struct lb4_service *svc;

	__builtin_memset(k, 0, sizeof(*k));
	k->address = address;
	k->dport = dport;
	k->proto = proto;
	k->scope = LB_SCOPE_EXT;
	svc = bpf_map_lookup_elem(&cilium_lb4_services, k);
	if (svc && internal && (svc->flags & LB_F_TWO_SCOPES)) {
		k->scope = LB_SCOPE_INT;
		svc = bpf_map_lookup_elem(&cilium_lb4_services, k);
	}
	return svc;
}

/* lb4_lookup_any_node finds the NodePort that a local client (a pod or
 * the node) reaches at an address of a node that has no frontend of its
 * own here: another node's, or another of this node's. Such frontends are
 * kept at the unspecified address (Cilium's surrogate). The connection is
 * translated where it starts, so that policy judges the backend, not the
 * node: a pod allowed to reach the nodes but not a backend cannot reach it
 * through another node's NodePort. */
static __always_inline struct lb4_service *lb4_lookup_any_node(struct lb4_key *k, __u32 daddr, __u16 dport,
							       __u8 proto)
{
	struct lb4_service *svc = lb4_lookup_service(k, 0, dport, proto, 1);
	__u32 id;

	if (!svc || !(svc->flags & LB_F_NODEPORT))
		return 0;
	id = identity_of4(daddr);
	if (id != IDENTITY_HOST && id != IDENTITY_REMOTE_NODE)
		return 0;
	return svc;
}

/* lb4_lookup_local finds the frontend a local client reaches at daddr:
 * dport, the internal scope's; with any_node, also a NodePort at any
 * node's address. k->address is then 0. */
static __always_inline struct lb4_service *lb4_lookup_local(struct lb4_key *k, __u32 daddr, __u16 dport,
							    __u8 proto, int any_node)
{
	struct lb4_service *svc = lb4_lookup_service(k, daddr, dport, proto, 1);

	if (svc || !any_node)
		return svc;
	return lb4_lookup_any_node(k, daddr, dport, proto);
}

/* lb4_source_denied says whether the frontend svc keeps out a client at
 * saddr: it has source ranges and none holds the address. A frontend
 * whose ranges are being written admits fewer clients meanwhile, never
 * more: the agent removes what goes before it adds what comes. */
static __always_inline int lb4_source_denied(const struct lb4_service *svc, __u32 saddr)
{
	struct lb4_source_range_key k = {
		.prefixlen = 32 + 32,
		.rev_nat_index = svc->rev_nat_index,
		.address = saddr,
	};

	if (!(svc->flags & LB_F_SOURCE_RANGE))
		return 0;
	return !bpf_map_lookup_elem(&cilium_lb4_source_range, &k);
}

static __always_inline struct lb4_backend *lb4_lookup_backend(__u32 backend_id)
{
	return bpf_map_lookup_elem(&cilium_lb4_backends, &backend_id);
}

/* lb4_select_slot returns the backend of slot (hash % count) + 1, 0 when
 * the service has none or its slots are being rewritten. */
static __always_inline __u32 lb4_select_slot(const struct lb4_key *svc_key, const struct lb4_service *svc,
					     __u32 hash)
{
	struct lb4_key k = *svc_key;
	struct lb4_service *slot;

	if (!svc->count)
		return 0;
	k.backend_slot = (hash % svc->count) + 1;
	slot = bpf_map_lookup_elem(&cilium_lb4_services, &k);
	return slot ? slot->backend_id : 0;
}

/* lb_mix is a round of the flow hash: a word folded into h, then mixed
 * (murmur3's finalizer), so that every bit of the word moves every bit
 * of the result. */
static __always_inline __u32 lb_mix(__u32 h, __u32 w)
{
	h ^= w;
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* lb4_flow_hash hashes a flow to a frontend with the cluster's seed: the
 * same flow hashes alike on every node. Under affinity the client's port
 * is left out, so that all of a client's connections hash alike. */
static __always_inline __u32 lb4_flow_hash(__u32 saddr, __u32 daddr, __u16 sport, __u16 dport, __u8 proto,
					   int affinity)
{
	__u32 h = LB_MAGLEV_SEED;

	h = lb_mix(h, saddr);
	h = lb_mix(h, daddr);
	h = lb_mix(h, ((__u32)(affinity ? 0 : sport) << 16) | dport);
	return lb_mix(h, proto);
}

/* lb4_select_maglev returns the backend of the flow's slot in the
 * frontend's Maglev table, 0 when it has none (being written, or the
 * agent has not come to it yet). */
static __always_inline __u32 lb4_select_maglev(const struct lb4_service *svc, __u32 hash)
{
	__u16 index = svc->rev_nat_index;
	__u32 zero = 0, slot;
	__u32 *table;
	void *inner;

	inner = bpf_map_lookup_elem(&cilium_lb4_maglev, &index);
	if (!inner)
		return 0;
	table = bpf_map_lookup_elem(inner, &zero);
	if (!table)
		return 0;
	slot = hash % LB_MAGLEV_SIZE;
	/* The compiler knows slot < LB_MAGLEV_SIZE; the verifier learns it
	 * from this test, which the barrier keeps. */
	asm volatile("" : "+r"(slot));
	if (slot >= LB_MAGLEV_SIZE)
		return 0;
	return table[slot];
}

/* lb_affinity_backend returns the client's backend for the service while
 * its affinity lasts and the backend takes new connections, else 0. */
static __always_inline __u32 lb_affinity_backend(const struct lb4_service *svc, __u64 client, __u8 by_cookie,
						 __u64 now)
{
	struct lb_affinity_key k = { .client = client, .rev_nat_index = svc->rev_nat_index, .by_cookie = by_cookie };
	struct lb_affinity_value *v;
	struct lb4_backend *be;

	if (!(svc->flags & LB_F_AFFINITY))
		return 0;
	v = bpf_map_lookup_elem(&cilium_lb_affinity, &k);
	if (!v || now - v->last_used > (__u64)svc->affinity_timeout * 1000000000ULL)
		return 0;
	be = lb4_lookup_backend(v->backend_id);
	if (!be || be->state != LB_BACKEND_ACTIVE)
		return 0;
	v->last_used = now;
	return v->backend_id;
}

/* lb_affinity_record remembers the client's backend for the service. */
static __always_inline void lb_affinity_record(const struct lb4_service *svc, __u64 client, __u8 by_cookie,
					       __u32 backend_id, __u64 now)
{
	struct lb_affinity_key k = { .client = client, .rev_nat_index = svc->rev_nat_index, .by_cookie = by_cookie };
	struct lb_affinity_value v = { .last_used = now, .backend_id = backend_id };

	if (svc->flags & LB_F_AFFINITY)
		bpf_map_update_elem(&cilium_lb_affinity, &k, &v, BPF_ANY);
}

/* lb4_select picks the backend of a new connection: the client's by
 * affinity, else, for a flow with a hash (flow_hash: a client from
 * outside at a frontend with LB_F_MAGLEV), its slot of the frontend's
 * Maglev table, else one at random. A frontend whose table is missing
 * still serves, at random. 0: no backend serves. */
static __always_inline __u32 lb4_select(const struct lb4_key *svc_key, const struct lb4_service *svc,
					__u64 client, __u8 by_cookie, const __u32 *flow_hash)
{
	__u64 now = bpf_ktime_get_coarse_ns();
	__u32 id = lb_affinity_backend(svc, client, by_cookie, now);

	if (id)
		return id;
	if (flow_hash && svc->count)
		id = lb4_select_maglev(svc, *flow_hash);
	if (!id)
		id = lb4_select_slot(svc_key, svc, bpf_get_prandom_u32());
	if (id)
		lb_affinity_record(svc, client, by_cookie, id, now);
	return id;
}

/* Keeps the enums the Go side shares in BTF for bpf2go (as go_contract
 * in common.h). Never used. */
struct lb_contract {
	enum lb_scope scope;
	enum lb_flags flags;
	enum lb_backend_state state;
};
struct lb_contract *const __lb_contract __attribute__((unused)) = 0;
