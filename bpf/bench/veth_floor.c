// SPDX-License-Identifier: Apache-2.0
/* The floor of bench/datapath, scenario (f): the least any datapath on veth
 * pods must do, with nothing looked up. On the pod's host-side device,
 * floor_out sends every IPv4 packet out of the uplink with fixed MACs; on
 * the uplink, floor_in puts packets for the pod straight into its
 * namespace with bpf_redirect_peer. No conntrack, policy, FIB or TTL:
 * whatever (c) costs above (f) is the datapath's own work, and (f) below
 * (a) is what the veth crossing costs. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

volatile const __u32 OUT_IFINDEX = 0;
volatile const __u32 POD_IPV4 = 0; /* network order; floor_in only */
volatile const __u8 DST_MAC[ETH_ALEN] = {};
volatile const __u8 SRC_MAC[ETH_ALEN] = {};

static __always_inline int set_macs(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return -1;
	for (int i = 0; i < ETH_ALEN; i++) {
		eth->h_dest[i] = DST_MAC[i];
		eth->h_source[i] = SRC_MAC[i];
	}
	return 0;
}

SEC("tc")
int floor_out(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if (set_macs(skb) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(OUT_IFINDEX, 0);
}

SEC("tc")
int floor_in(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + ETH_HLEN;

	if (skb->protocol != bpf_htons(ETH_P_IP) || (void *)(ip + 1) > data_end || ip->daddr != POD_IPV4)
		return TC_ACT_OK;
	if (set_macs(skb) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect_peer(OUT_IFINDEX, 0);
}

char __license[] SEC("license") = "Dual BSD/GPL";
