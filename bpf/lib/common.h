/* SPDX-License-Identifier: Apache-2.0 */
/* Shared definitions of the datapath: the numbers and the map key and value
 * layouts that the Go side takes from BTF (bpf2go turns them into Go types
 * and constants), and the maps themselves.
 * Every map is pinned by name so that all programs of one node share it. */
#pragma once

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* linux/icmp.h pulls in libc headers, so the ICMP header is spelled here. */
struct icmphdr {
	__u8 type;
	__u8 code;
	__u16 checksum;
	union {
		struct {
			__u16 id;
			__u16 sequence;
		} echo;
		__u32 gateway;
	} un;
};

#define ICMP_ECHOREPLY 0
#define ICMP_DEST_UNREACH 3
#define ICMP_SOURCE_QUENCH 4
#define ICMP_ECHO 8
#define ICMP_TIME_EXCEEDED 11
#define ICMP_PARAMETERPROB 12

#define PACKET_HOST 0 /* linux/if_packet.h */

/* The address family of keys and events: AF_INET's number, named apart
 * from the libc macro so that it can be an enum that bpf2go exports. */
enum addr_family {
	FAMILY_INET = 2,
};

/* Reserved identities keep Cilium's numbers. */
enum reserved_identity {
	IDENTITY_ANY = 0, /* wildcard in policy keys */
	IDENTITY_HOST = 1,
	IDENTITY_WORLD = 2,
	IDENTITY_UNMANAGED = 3,
	IDENTITY_INIT = 5,
	IDENTITY_REMOTE_NODE = 6,
	/* Identities with this bit are node-local (CIDR identities): they
	 * never leave the node that allocated them. */
	IDENTITY_SCOPE_LOCAL = 1 << 24,
};

/* The numbers the Go side shares are enums, not macros: bpf2go exports
 * them from BTF (generate.go's -type list), so Go has no copy to keep in
 * step. Struct fields and constants stay __u8 and __u32 where the layout
 * wants that size; enums only name the values. */

/* Event types and trace points keep the numbers of Cilium's monitor so
 * that a Hubble parser can map them one to one. */
enum event_type {
	EVENT_DROP = 1,
	EVENT_TRACE = 4,
	EVENT_POLICY_VERDICT = 5,
	EVENT_TRACE_SOCK = 7, /* socket-level balancing translated a call */
};

/* Where socket-level balancing saw a call (an EVENT_TRACE_SOCK's
 * subtype), Cilium's numbers: before and after the forward translation. */
enum sock_xlate_point {
	SOCK_XLATE_PRE_FWD = 1,
	SOCK_XLATE_POST_FWD = 2,
};

enum trace_point {
	TRACE_TO_LXC = 0,
	TRACE_TO_PROXY = 1,
	TRACE_TO_HOST = 2,
	TRACE_TO_STACK = 3,
	TRACE_TO_OVERLAY = 4,
	TRACE_FROM_LXC = 5,
	TRACE_FROM_HOST = 7,
	TRACE_FROM_OVERLAY = 9,
	TRACE_FROM_NETWORK = 10,
};

/* Cilium's monitor-aggregation levels. */
enum monitor_aggregation {
	MONITOR_NONE = 0, /* every forwarded packet */
	MONITOR_LOWEST = 1, /* no traces where packets are received */
	MONITOR_LOW = 2, /* as lowest */
	MONITOR_MEDIUM = 3, /* and a connection's only when it has news */
	MONITOR_MAX = 4, /* as medium */
};

/* Metric reasons: 0 means forwarded, drops use their drop reason. The
 * numbers are Cilium's, so that Hubble reports them unchanged. */
enum drop_reason {
	REASON_FORWARDED = 0,
	DROP_INVALID_SIP = 132,
	DROP_POLICY = 133,
	DROP_INVALID = 134,
	DROP_UNSUPPORTED_L3 = 139,
	DROP_NO_TUNNEL_KEY = 147,
	DROP_CT_CREATE = 155,
	DROP_FRAG_NOSUPPORT = 157,
	DROP_NO_SERVICE = 158, /* a service frontend without a backend */
	DROP_UNKNOWN_CT = 163,
	DROP_NAT_NO_MAPPING = 167,
	DROP_INVALID_IDENTITY = 171,
	DROP_UNKNOWN_SENDER = 172,
	DROP_FRAG_NOT_FOUND = 175,
	/* a client outside a frontend's loadBalancerSourceRanges */
	DROP_NOT_IN_SRC_RANGE = 177,
	/* a connection for the layer-7 proxy, which has no socket open */
	DROP_PROXY_LOOKUP_FAILED = 178,
	DROP_PROXY_SET_FAILED = 179, /* the kernel refused the proxy's socket */
	DROP_PROXY_UNKNOWN_PROTO = 180, /* the proxy serves TCP and UDP only */
	DROP_POLICY_DENY = 181,
};

enum traffic_direction {
	DIR_INGRESS = 1,
	DIR_EGRESS = 2,
};

/* Policy verdicts in events. */
enum policy_verdict {
	VERDICT_ALLOW = 1,
	VERDICT_DENY = 2,
	VERDICT_REDIRECT = 3, /* allowed through the node's layer-7 proxy */
};

/* Connection tracking results. */
enum ct_status {
	CT_NEW = 0,
	CT_ESTABLISHED = 1,
	CT_REPLY = 2,
	CT_RELATED = 3,
	CT_INVALID = 4, /* a TCP segment of no tracked connection, not a SYN */
};

/* Endpoint flags (struct endpoint_info.flags). */
enum endpoint_flags {
	EP_F_INGRESS_ENFORCE = 1,
	EP_F_EGRESS_ENFORCE = 2,
};

/* Policy entry flags. */
enum policy_flags {
	POLICY_F_DENY = 1,
};

/* Policy key prefix lengths: identity, endpoint and direction are always
 * matched; protocol and port may be wildcarded, ports also by range. */
enum policy_prefix {
	POLICY_PREFIX_STATIC = 8 * 7,
	POLICY_PREFIX_PROTO = POLICY_PREFIX_STATIC + 8,
	POLICY_PREFIX_FULL = POLICY_PREFIX_PROTO + 16,
};

/* Routing modes (const TUNNEL_MODE). */
enum routing_mode {
	ROUTING_NATIVE = 0,
	ROUTING_TUNNEL = 1,
};

/* Set on packets this datapath already encapsulated so that the overlay
 * egress program leaves their tunnel key alone. */
#define MARK_ENCAPSULATED 0x0ce10000

/* Marks of the layer-7 proxy's traffic, Cilium's values in the bits
 * 0x0f00. MARK_TO_PROXY routes a packet into the node's stack, where a
 * policy rule (fwmark 0x200/0xf00, table 2004: local default) delivers it
 * to the proxy's socket whatever its destination. MARK_PROXY_EGRESS is on
 * what the proxy sends upstream on behalf of a local endpoint, from that
 * endpoint's address: the datapath judges it as the endpoint, and sends
 * the replies back to the proxy. MARK_PROXY_INGRESS is on what the
 * proxy sends to a local endpoint whose ingress rules it judged, from the
 * client's address: the endpoint's ingress policy is not asked again.
 * Only the node's root can mark packets: a pod's marks are cleared as
 * they leave its namespace. */
#define MARK_MAGIC_MASK 0x0f00
#define MARK_TO_PROXY 0x0200
#define MARK_PROXY_INGRESS 0x0a00
#define MARK_PROXY_EGRESS 0x0b00

struct endpoint_key {
	__u8 addr[16]; /* IPv4 in the first four bytes */
	__u8 family;
	__u8 pad[3];
};

struct endpoint_info {
	__u32 ifindex; /* host-side veth, the target of bpf_redirect_peer */
	__u32 identity;
	__u16 ep_id;
	__u16 flags;
	__u8 mac[6];      /* the pod's MAC */
	__u8 node_mac[6]; /* the host-side veth's MAC */
};

struct ipcache_key {
	__u32 prefixlen; /* 32 (family and pad) + address prefix */
	__u8 family;
	__u8 pad[3];
	__u8 addr[16];
};

struct ipcache_info {
	__u32 identity;
	__u32 tunnel_ipv4; /* network order; 0: not behind a tunnel */
	__u8 flags;
	__u8 pad[3];
	/* A pod's or node's address inside a NetworkPolicy ipBlock also has
	 * the CIDR identity of the block's prefix, which policy judges
	 * beside its own identity; 0 for none. */
	__u32 cidr_identity;
};

struct policy_key {
	__u32 prefixlen;
	__u32 identity; /* remote identity, 0 for any */
	__u16 ep_id;
	__u8 direction;
	__u8 protocol; /* wildcarded by a prefix below POLICY_PREFIX_PROTO */
	__u16 dport;   /* network order, ranges are prefixes */
	__u8 pad[2];
};

struct policy_entry {
	__u16 proxy_port;
	__u8 flags;
	__u8 pad;
	/* cookie names the rules that wrote the entry; the agent resolves
	 * it, and policy verdict events carry the deciding entry's. */
	__u32 cookie;
};

/* Kinds of conntrack keys (ct4_key.flags): a service entry has the same
 * tuple as a connection to the frontend would, and never matches one. */
enum ct_key_flags {
	CT_KEY_SERVICE = 1, /* a client's tuple to a frontend: names its backend */
};

struct ct4_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 protocol;
	__u8 flags; /* enum ct_key_flags */
	__u8 pad[2];
};

enum ct_flags {
	CT_F_SEEN_REPLY = 1,
	CT_F_TX_CLOSING = 2,
	CT_F_RX_CLOSING = 4,
	CT_F_SNAT = 8, /* the originator is masqueraded to the node */
	/* The originator, or the responder, is no local endpoint: a pod's
	 * packet towards it needs no endpoint lookup. Addresses of local
	 * endpoints come from the node's own pod CIDR, so a remote one does
	 * not become local while its connections live. */
	CT_F_NO_SRC_EP = 16,
	CT_F_NO_DST_EP = 32,
	/* A connection from outside the node that a frontend of its external
	 * scope sent to a local backend (lib/nodeport.h): the backend's
	 * replies are translated back where they leave the pod, since no
	 * client node will. */
	CT_F_NODEPORT = 64,
	/* An allow with layer-7 rules sent the connection to the node's
	 * proxy: the originator's packets go to the proxy's socket
	 * (ct_entry.proxy_port), never to the destination. */
	CT_F_TO_PROXY = 128,
	/* The originator is the proxy, on behalf of a local endpoint whose
	 * address it uses: the replies go back to the proxy's socket. */
	CT_F_PROXY_UPSTREAM = 256,
};

/* A connection remembers what its first packet needed from the ipcache,
 * so that later packets need no longest-prefix lookup. */
struct ct_entry {
	__u64 expires; /* CLOCK_MONOTONIC nanoseconds */
	__u64 packets;
	__u64 bytes;
	__u32 src_identity;
	__u32 dst_identity;
	__u32 tunnel_ipv4; /* network order: the node behind the remote side */
	__u16 flags;
	/* A connection a service translated: the reverse NAT entry that its
	 * replies' source is translated back with. 0: none. */
	__u16 rev_nat_index;
	union {
		__u32 backend_id; /* service entries (CT_KEY_SERVICE): the backend */
		/* A connection that a NodePort at another node's address
		 * translated (lb4_lookup_any_node): that address, which its
		 * replies' source goes back to, since the service's reverse
		 * NAT entry names none. 0 otherwise. */
		__u32 frontend_addr;
	};
	/* Monitor aggregation (ct_report): the TCP flags of CT_REPORT_FLAGS
	 * each direction has shown, and when it last reported a trace, in
	 * seconds of ct_now. tx is the opener's direction, rx the replies'. */
	__u8 tx_flags_seen;
	__u8 rx_flags_seen;
	__u16 proxy_port; /* CT_F_TO_PROXY: the proxy's port */
	__u32 last_tx_report;
	__u32 last_rx_report;
};

struct nat4_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 protocol;
	__u8 dir; /* DIR_EGRESS: the original tuple; DIR_INGRESS: the reply's */
	/* DIR_EGRESS of a flow from outside: the frontend that sent it on
	 * (its reverse NAT index). A client may reach one backend through
	 * two frontends from one port (Linux picks a source port per
	 * destination), one after the other or at once: two flows, each
	 * with its own port. 0 otherwise. */
	__u16 rev_nat_index;
};

struct nat4_entry {
	__u32 addr; /* network order */
	__u16 port; /* network order */
	/* A flow from outside sent to a remote backend (lib/nodeport.h):
	 * the service whose reverse NAT entry its replies' source goes back
	 * to. 0: a masqueraded pod flow. */
	__u16 rev_nat_index;
};

struct frag4_key {
	__u32 saddr;
	__u32 daddr;
	__u16 id;
	__u8 protocol;
	__u8 pad;
};

struct frag_ports {
	__u16 sport;
	__u16 dport;
};

/* The metrics map is an array indexed by reason and direction: no hashing,
 * and the verifier inlines the lookup. Directions fit in two bits. These
 * stay macros: METRICS_INDEX takes arguments, and the Go side reads the
 * map's size from the map, not from a copy of the number. */
#define METRICS_INDEX(reason, dir) (((__u32)(reason) << 2) | ((dir) & 3))
#define METRICS_ENTRIES (256 << 2)

struct metrics_value {
	__u64 packets;
	__u64 bytes;
};

/* A FIB answer cached per CPU in a direct-mapped array (cilium_fib4),
 * valid while the node's route generation (cilium_fib_gen, bumped by the
 * agent on every route, neighbour and link change) is the one it was
 * looked up under, and for FIB_CACHE_LIFETIME at most, which bounds
 * staleness while no agent watches. */
struct fib4_entry {
	__u64 expires; /* coarse monotonic nanoseconds */
	__u32 saddr;
	__u32 daddr;
	__u32 iif;
	__u32 oif;
	__u32 generation;
	__u8 dmac[6];
	__u8 smac[6];
};

/* Macros, not enums: the lifetime needs 64 bits, which a C enum before
 * C23 cannot hold, and neither number is shared with Go. */
#define FIB_CACHE_SLOTS 1024
#define FIB_CACHE_LIFETIME 1000000000ULL

struct event {
	__u64 ktime;
	__u32 ifindex;
	__u32 src_identity;
	__u32 dst_identity;
	__u32 len;
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport; /* network order */
	__u16 dport; /* network order */
	__u16 source_ep;
	__u16 dst_ep;
	__u8 type;
	__u8 subtype; /* drop reason, trace point or socket translation point */
	__u8 protocol;
	__u8 direction;
	__u8 verdict;
	__u8 ct_status;
	__u8 tcp_flags;
	__u8 family;
	/* The cookie of the policy entry that decided a policy verdict (and
	 * the drop it caused); 0 when no entry matched. */
	__u32 policy_cookie;
	/* The reverse NAT index of the service that translated the packet's
	 * connection (lib/lb.h): the Service Hubble names. 0: none. */
	__u16 rev_nat;
	__u16 pad;
	/* A socket trace's: the network namespace of the calling process,
	 * which names its pod. */
	__u64 netns_cookie;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct endpoint_key);
	__type(value, struct endpoint_info);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lxc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct ipcache_key);
	__type(value, struct ipcache_info);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_ipcache SEC(".maps");

/* The policy maps' key and value types, in BTF for bpf2go (generate.go's
 * -type list): the nested map definition gives only their sizes, since
 * clang describes a struct that only it points to as a bare declaration,
 * which no loader can size. Never used. */
struct policy_key *const __policy_key_type __attribute__((unused)) = 0;
struct policy_entry *const __policy_entry_type __attribute__((unused)) = 0;

/* Endpoint id -> its policy map. Each endpoint's policy is a map of its
 * own, so that no endpoint's policy can take the room another's needs,
 * and an endpoint's whole map can be swapped for a new one at once. The
 * agent sizes them (--bpf-policy-map-max); the inner definition is the
 * template. An endpoint without a map has no entry to match: where it
 * enforces, everything drops. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u32);
	__uint(max_entries, 4096);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_LPM_TRIE);
		__uint(key_size, sizeof(struct policy_key));
		__uint(value_size, sizeof(struct policy_entry));
		__uint(max_entries, 16384);
		__uint(map_flags, BPF_F_NO_PREALLOC);
	});
} cilium_policy_v2 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct4_key);
	__type(value, struct ct_entry);
	__uint(max_entries, 65536);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_ct4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct frag4_key);
	__type(value, struct frag_ports);
	__uint(max_entries, 8192);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_frag4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct metrics_value);
	__uint(max_entries, METRICS_ENTRIES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_metrics SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct fib4_entry);
	__uint(max_entries, FIB_CACHE_SLOTS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_fib4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_fib_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_events SEC(".maps");

static __always_inline struct ipcache_info *ipcache_lookup4(__u32 addr)
{
	struct ipcache_key k = { .prefixlen = 32 + 32, .family = FAMILY_INET };

	__builtin_memcpy(k.addr, &addr, 4);
	return bpf_map_lookup_elem(&cilium_ipcache, &k);
}

static __always_inline __u32 identity_of4(__u32 addr)
{
	struct ipcache_info *info = ipcache_lookup4(addr);

	return info ? info->identity : IDENTITY_WORLD;
}

/* Load-time constants common to every program family. The Go loader sets
 * them; the verifier then prunes whatever a node does not use. */
volatile const __u32 NODE_IPV4 = 0;
volatile const __u8 TUNNEL_MODE = ROUTING_NATIVE;
volatile const __u32 TUNNEL_IFINDEX = 0;
volatile const __u8 TRACE_ENABLED = 0;
/* How traces of forwarded packets are thinned (enum monitor_aggregation);
 * from MONITOR_MEDIUM on, a connection's direction reports when it shows
 * a TCP flag of CT_REPORT_FLAGS it had not shown, or CT_REPORT_INTERVAL
 * seconds after its last report. */
volatile const __u8 MONITOR_AGGREGATION = 0;
volatile const __u8 CT_REPORT_FLAGS = 0xff;
volatile const __u32 CT_REPORT_INTERVAL = 5;
volatile const __u8 MASQUERADE = 0;
/* Hand routed pod traffic to the stack instead of redirecting it by the
 * FIB: slower per packet, but the stack's queues spread work over CPUs. */
volatile const __u8 LEGACY_ROUTING = 0;

/* Keeps the event layout in BTF for bpf2go: ring buffer records are not
 * map values, so nothing else would name the type. */
struct event *const __event_type __attribute__((unused)) = 0;

/* Keeps the enums the Go side shares in BTF for bpf2go (generate.go's
 * -type list): an enum that only names values of __u8 fields and of
 * inlined functions' arguments leaves no type behind. Never used. */
struct go_contract {
	enum addr_family family;
	enum reserved_identity identity;
	enum event_type event_type;
	enum trace_point trace_point;
	enum sock_xlate_point sock_xlate_point;
	enum monitor_aggregation monitor_aggregation;
	enum drop_reason drop_reason;
	enum traffic_direction direction;
	enum policy_verdict verdict;
	enum ct_status ct_status;
	enum ct_flags ct_flags;
	enum ct_key_flags ct_key_flags;
	enum endpoint_flags endpoint_flags;
	enum policy_flags policy_flags;
	enum policy_prefix policy_prefix;
	enum routing_mode routing_mode;
};
struct go_contract *const __go_contract __attribute__((unused)) = 0;
