package datapath

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// TestPrivilegedFlushDisallowedWholeTable: a table of more entries than
// one batch reads, connections of two endpoints in it; a flush names the
// endpoints whose connections it judges, and forgets exactly those that
// their policy maps no longer allow, from every batch.
func TestPrivilegedFlushDisallowedWholeTable(t *testing.T) {
	e := newEnv(t, envOpts{policyEgress: true, ingressB: true, mode: spec.Tunnel})
	e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
	e.setPolicy(epB, ingressRule(idD, tcpProto, 80, 0))
	ipC, ipD := be32(netip.MustParseAddr("10.2.0.30")), be32(netip.MustParseAddr("10.2.0.40"))
	type conn struct {
		k       CTKey
		allowed bool
		ep      uint16
	}
	var conns []conn
	n := ctBatch*2 + 100 // three batches
	for i := range n {
		port := uint16(80)
		if i%3 == 0 {
			port = 443 // what no policy allows
		}
		k := CTKey{Sport: htons(uint16(10000 + i/2)), Dport: htons(port), Protocol: tcpProto}
		v := CTEntry{Expires: 1 << 62}
		c := conn{allowed: port == 80}
		if i%2 == 0 { // A's egress to C
			k.Saddr, k.Daddr, v.SrcIdentity, v.DstIdentity, c.ep = be32(ipA), ipC, idA, idC, epA
		} else { // D's ingress into B
			k.Saddr, k.Daddr, v.SrcIdentity, v.DstIdentity, c.ep = ipD, be32(ipB), idD, idB, epB
		}
		c.k = k
		must(t, e.maps.CT4.Put(&k, &v))
		conns = append(conns, c)
	}
	check := func(flushed map[uint16]bool) {
		t.Helper()
		var wrong []string
		for _, c := range conns {
			var v CTEntry
			kept := e.maps.CT4.Lookup(&c.k, &v) == nil
			if want := c.allowed || !flushed[c.ep]; kept != want {
				wrong = append(wrong, fmt.Sprintf("endpoint %d port %d: kept %v", c.ep, htons(c.k.Dport), kept))
			}
		}
		if len(wrong) > 0 {
			t.Fatalf("%d of %d connections wrong after flushing %v, first: %s", len(wrong), len(conns), flushed, wrong[0])
		}
	}
	must(t, e.maps.FlushDisallowed(epA))
	check(map[uint16]bool{epA: true})
	must(t, e.maps.FlushDisallowed(epA, epB))
	check(map[uint16]bool{epA: true, epB: true})
}
