// SPDX-License-Identifier: Apache-2.0
/* Test harness for the overlay ingress: BPF_PROG_RUN cannot hand a tunnel
 * key to a program (one set with bpf_skb_set_tunnel_key names the
 * destination, not the sender), so this wrapper makes the key from its own
 * constants and runs the real handler. TEST_VNI 0 means "no tunnel key". */
#include "../node.c"

volatile const __u32 TEST_VNI = 0;
volatile const __u32 TEST_REMOTE_IPV4 = 0; /* host order */

SEC("tc")
int test_from_overlay(struct __sk_buff *skb)
{
	struct bpf_tunnel_key key = { .tunnel_id = TEST_VNI, .remote_ipv4 = TEST_REMOTE_IPV4 };

	return overlay_ingress(skb, &key);
}
