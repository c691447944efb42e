package datapath

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// BenchmarkPrivilegedProg reports the kernel's own time per packet for the hot
// paths: established flows through each program, with and without a large
// ipcache and policy. Run with `go test -bench PrivilegedProg -run '^$'` as root.
func BenchmarkPrivilegedProg(b *testing.B) {
	for _, bc := range []struct {
		name  string
		scale int
		prog  func(e *env) *ebpf.Program
		pkt   pkt
	}{
		{"from-container/established/native", 0, func(e *env) *ebpf.Program { return e.fromContainer }, tcp(ipA, ipC, 40000, 80, "A")},
		{"from-container/established/10k", 10000, func(e *env) *ebpf.Program { return e.fromContainer }, tcp(ipA, ipC, 40000, 80, "A")},
		{"from-container/local-peer", 0, func(e *env) *ebpf.Program { return e.fromContainer }, tcp(ipA, ipB, 40000, 80, "A")},
		{"from-netdev/reply", 0, func(e *env) *ebpf.Program { return e.fromNetdev }, tcp(ipC, ipA, 80, 40000, "A")},
		{"from-netdev/reply/10k", 10000, func(e *env) *ebpf.Program { return e.fromNetdev }, tcp(ipC, ipA, 80, 40000, "A")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newBenchEnv(b, bc.scale)
			// The first packet of the flow creates its conntrack entry.
			e.run(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S").frame(e.t))
			e.run(e.fromContainer, tcp(ipA, ipB, 40000, 80, "S").frame(e.t))
			frame := bc.pkt.frame(e.t)
			out := make([]byte, len(frame)+256)
			opts := &ebpf.RunOptions{Data: frame, DataOut: out, Repeat: uint32(b.N)}
			b.ResetTimer()
			_, d, err := bc.prog(e).Benchmark(opts.Data, int(opts.Repeat), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d/time.Nanosecond), "ns/pkt")
		})
	}
}

// newBenchEnv is the test topology with, at scale > 0, enforcement on and
// scale identities in the ipcache and scale policy entries for A.
func newBenchEnv(b *testing.B, scale int) *env {
	e := newEnv(b, envOpts{mode: spec.Native, policyEgress: scale > 0, policyIngress: scale > 0})
	if scale == 0 {
		return e
	}
	entries := []spec.PolicyEntry{egress(idC, tcpProto, 80, 0), {Direction: spec.Ingress, Identity: idC}}
	for i := range scale {
		id := uint32(20000 + i)
		a := netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)})
		must(b, e.maps.UpsertIPCache(netip.PrefixFrom(a, 32), spec.IPCacheEntry{Identity: identity.NumericIdentity(id), TunnelEndpoint: remoteIP}))
		entries = append(entries, spec.PolicyEntry{Direction: spec.Ingress, Identity: identity.NumericIdentity(id), Protocol: tcpProto, Port: uint16(1000 + i%5000)})
	}
	must(b, e.maps.SetPolicy(epA, entries))
	if n := len(entries); n < scale {
		b.Fatal(fmt.Sprint("too few entries: ", n))
	}
	return e
}
