package datapath

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
)

// FuzzPrivilegedFromContainerDefaultDeny throws arbitrary frames at an endpoint
// whose egress is enforced with no rule at all. Whatever the bytes, the
// only thing that may pass is ARP: no malformed header, fragment, ICMP
// error or protocol trick may get a packet out.
func FuzzPrivilegedFromContainerDefaultDeny(f *testing.F) {
	for _, p := range []pkt{
		tcp(ipA, ipC, 40000, 80, "S"),
		udp(ipA, ipWorld, 5000, 53),
		echo(ipA, ipB, 1, false),
		unreachable(f, ipA, ipC, udp(ipC, ipA, 53, 5000)),
		{src: ipA, dst: ipC, proto: 6, ipID: 9, fragOffset: 3},
		{src: ipA, dst: ipC, proto: 17, sport: 1, dport: 2, ipID: 9, moreFrags: true},
	} {
		f.Add(p.frame(f))
	}
	f.Add(arpFrame(f))
	f.Add(ipv6Frame(f))
	e := newEnv(f, envOpts{policyEgress: true, policyIngress: true, ingressB: true})
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 {
			return // the kernel refuses to run on less than an Ethernet header
		}
		got, _, err := runRaw(e, frame)
		if err != nil {
			return // the kernel refused the input
		}
		if got != actShot && binary.BigEndian.Uint16(frame[12:14]) != 0x0806 {
			t.Fatalf("verdict %d for %x", got, frame)
		}
	})
}

func runRaw(e *env, frame []byte) (uint32, []byte, error) {
	opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)}
	ret, err := e.fromContainer.Run(opts)
	return ret, opts.DataOut, err
}
