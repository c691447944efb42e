/* SPDX-License-Identifier: Apache-2.0 */
/* L2 announcements: a node answers ARP for the Service addresses it won
 * the right to announce (pkg/l2announce elects one node per Service), on
 * the devices a CiliumL2AnnouncementPolicy names. The agent writes one
 * entry per address and device; the request that asks for the address on
 * that device gets a reply from the device's MAC, sent back out where it
 * came in, without the stack. */
#pragma once

#include "common.h"

struct l2_responder_key {
	__u32 ip4; /* network order */
	__u32 ifindex;
};

struct l2_responder_entry {
	__u8 mac[6]; /* the device's, which the reply gives */
	__u16 pad;
	__u64 responses; /* replies sent */
};

/* The agent's heartbeat. Entries are only as good as the election behind
 * them: a node whose agent stopped renewing its leases loses them to
 * another node after the lease duration, so the datapath stops answering
 * once the agent has not been seen for max_age, and two nodes never
 * answer for one address for longer than that. */
struct l2_liveness {
	__u64 seen;    /* bpf_ktime_get_ns of the agent's last beat; 0: never */
	__u64 max_age; /* nanoseconds */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct l2_responder_key);
	__type(value, struct l2_responder_entry);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_l2_responder_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct l2_liveness);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_l2_liveness SEC(".maps");

#define ARPHRD_ETHER 1
#define ARPOP_REQUEST 1
#define ARPOP_REPLY 2

/* An ARP packet for IPv4 over Ethernet, as on the wire. */
struct arp_eth {
	__u16 htype;
	__u16 ptype;
	__u8 hlen;
	__u8 plen;
	__u16 op;
	__u8 sha[6];
	__u8 spa[4];
	__u8 tha[6];
	__u8 tpa[4];
} __attribute__((packed));

static __always_inline int l2_agent_alive(void)
{
	__u32 zero = 0;
	struct l2_liveness *l = bpf_map_lookup_elem(&cilium_l2_liveness, &zero);

	return l && l->seen && bpf_ktime_get_ns() - l->seen <= l->max_age;
}

/* l2_respond turns an ARP request for an announced address into the reply
 * and sends it back out of its device; anything else goes on to the
 * stack untouched. */
static __always_inline int l2_respond(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct arp_eth *arp = (void *)(eth + 1);
	struct l2_responder_key key = { .ifindex = skb->ifindex };
	struct l2_responder_entry *e;
	__u8 spa[4];

	if ((void *)(arp + 1) > data_end)
		return TC_ACT_OK;
	if (arp->htype != bpf_htons(ARPHRD_ETHER) || arp->ptype != bpf_htons(ETH_P_IP) ||
	    arp->hlen != 6 || arp->plen != 4 || arp->op != bpf_htons(ARPOP_REQUEST))
		return TC_ACT_OK;
	__builtin_memcpy(&key.ip4, arp->tpa, 4);
	/* A gratuitous request announces its sender; it asks nobody. */
	if (__builtin_memcmp(arp->spa, arp->tpa, 4) == 0)
		return TC_ACT_OK;
	e = bpf_map_lookup_elem(&cilium_l2_responder_v4, &key);
	if (!e || !l2_agent_alive())
		return TC_ACT_OK;

	__builtin_memcpy(spa, arp->spa, 4);
	__builtin_memcpy(eth->h_dest, arp->sha, 6);
	__builtin_memcpy(eth->h_source, e->mac, 6);
	arp->op = bpf_htons(ARPOP_REPLY);
	__builtin_memcpy(arp->tha, arp->sha, 6);
	__builtin_memcpy(arp->tpa, spa, 4);
	__builtin_memcpy(arp->sha, e->mac, 6);
	__builtin_memcpy(arp->spa, &key.ip4, 4);
	__sync_fetch_and_add(&e->responses, 1);
	return bpf_redirect(skb->ifindex, 0);
}
