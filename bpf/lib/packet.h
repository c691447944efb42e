/* SPDX-License-Identifier: Apache-2.0 */
/* IPv4 parsing into the tuple that conntrack, policy and events share. */
#pragma once

#include "common.h"

#define PARSE_NOT_IPV4 1

#define IP_TTL_OFF (ETH_HLEN + 8)
#define IP_CSUM_OFF (ETH_HLEN + 10)
#define IP_SADDR_OFF (ETH_HLEN + 12)
#define IP_DADDR_OFF (ETH_HLEN + 16)

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

struct pkt {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;       /* network order; ICMP echo: the id on requests */
	__u16 dport;       /* network order; ICMP echo: the id on replies */
	__u16 policy_port; /* network order; ICMP: the type */
	__u16 ip_id;
	__u32 l4_off;
	__u32 len;
	__u8 protocol;
	__u8 tcp_flags;
	__u8 icmp_type;
	__u8 first_frag; /* more fragments follow this one */
	__u8 later_frag; /* a non-first fragment: no L4 header */
	__u8 eth_proto_arp;
};

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_RST 0x04
#define TCP_FLAG_ACK 0x10

static __always_inline int icmp_is_error(__u8 type)
{
	return type == ICMP_DEST_UNREACH || type == ICMP_TIME_EXCEEDED ||
	       type == ICMP_PARAMETERPROB || type == ICMP_SOURCE_QUENCH;
}

/* l4_load copies the first n bytes of the L4 header into to: straight
 * from the linear data when they are there (no helper call), by the
 * helper when the header lies beyond it. n must be a constant. */
static __always_inline int l4_load(struct __sk_buff *skb, const struct pkt *p, void *to, const __u32 n)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	__u32 off = p->l4_off;

	if (off <= ETH_HLEN + 60 && data + off + n <= data_end) {
		__builtin_memcpy(to, data + off, n);
		return 0;
	}
	return bpf_skb_load_bytes(skb, off, to, n);
}

static __always_inline struct frag4_key frag_key(const struct pkt *p)
{
	struct frag4_key fk = {
		.saddr = p->saddr,
		.daddr = p->daddr,
		.id = p->ip_id,
		.protocol = p->protocol,
	};

	return fk;
}

/* frag_record keeps a first fragment's ports for the later fragments of
 * its datagram (parse_l4). The caller records only once it trusts the
 * packet's source: a pod's forged first fragment (another sender's
 * address, its IP id) would otherwise hand that sender's later fragments
 * ports of the forger's choosing, which policy then judges. */
static __always_inline void frag_record(const struct pkt *p)
{
	struct frag4_key fk;
	struct frag_ports fp = { .sport = p->sport, .dport = p->dport };

	if (!p->first_frag)
		return;
	fk = frag_key(p);
	bpf_map_update_elem(&cilium_frag4, &fk, &fp, BPF_ANY);
}

/* parse_l4 fills ports for the tuple. Non-first fragments carry no L4
 * header: their ports come from the first fragment (frag_record), or
 * they are dropped, so a fragment can never reach a port that policy
 * would not allow. */
static __always_inline int parse_l4(struct __sk_buff *skb, struct pkt *p)
{
	struct frag4_key fk = frag_key(p);

	if (p->later_frag) {
		struct frag_ports *fp = bpf_map_lookup_elem(&cilium_frag4, &fk);

		if (!fp)
			return -DROP_FRAG_NOT_FOUND;
		p->sport = fp->sport;
		p->dport = fp->dport;
		p->policy_port = fp->dport;
		return 0;
	}

	switch (p->protocol) {
	case IPPROTO_TCP: {
		__u8 hdr[14];

		if (l4_load(skb, p, hdr, sizeof(hdr)) < 0)
			return -DROP_INVALID;
		__builtin_memcpy(&p->sport, &hdr[0], 2);
		__builtin_memcpy(&p->dport, &hdr[2], 2);
		p->tcp_flags = hdr[13];
		break;
	}
	case IPPROTO_UDP:
	case IPPROTO_SCTP: {
		/* SCTP's common header starts with the ports, as UDP's does. */
		__u16 ports[2];

		if (l4_load(skb, p, ports, sizeof(ports)) < 0)
			return -DROP_INVALID;
		p->sport = ports[0];
		p->dport = ports[1];
		break;
	}
	case IPPROTO_ICMP: {
		struct icmphdr ic;

		if (l4_load(skb, p, &ic, sizeof(ic)) < 0)
			return -DROP_INVALID;
		p->icmp_type = ic.type;
		p->policy_port = bpf_htons(ic.type);
		if (ic.type == ICMP_ECHO)
			p->sport = ic.un.echo.id;
		else if (ic.type == ICMP_ECHOREPLY)
			p->dport = ic.un.echo.id;
		break;
	}
	default:
		break;
	}
	if (p->protocol != IPPROTO_ICMP)
		p->policy_port = p->dport;
	return 0;
}

/* parse_ipv4 returns 0 for IPv4, PARSE_NOT_IPV4 for other frames and a
 * negative drop reason for malformed ones. */
static __always_inline int parse_ipv4(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	__u16 frag;

	if ((void *)(eth + 1) > data_end)
		return -DROP_INVALID;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) {
		p->eth_proto_arp = eth->h_proto == bpf_htons(ETH_P_ARP);
		return PARSE_NOT_IPV4;
	}
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return -DROP_INVALID;
	if (ip->version != 4 || ip->ihl < 5)
		return -DROP_INVALID;

	p->saddr = ip->saddr;
	p->daddr = ip->daddr;
	p->protocol = ip->protocol;
	p->ip_id = ip->id;
	p->l4_off = ETH_HLEN + ip->ihl * 4;
	p->len = skb->len;
	frag = bpf_ntohs(ip->frag_off);
	p->later_frag = (frag & IP_OFFSET) != 0;
	p->first_frag = !p->later_frag && (frag & IP_MF);
	return parse_l4(skb, p);
}
