package proxy

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium-go/cilium/pkg/fqdn"
)

// An answer is known while the agent was told of all it says (addresses
// and CNAME targets) under the same policy less than half its TTL ago.
func TestToldAnswersKnown(t *testing.T) {
	now := time.Now()
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	c := &compiled{run: 1, revision: 4}
	k := toldKey{ep: 7, addr: netip.MustParseAddr("10.0.0.7"), name: "a.example."}
	var told toldAnswers
	told.add(c, k, fqdn.Lookup{Name: k.name, IPs: []netip.Addr{a, b}, TTL: 60, Time: now,
		Targets: []fqdn.Target{{Name: "b.example.", TTL: 60}}})
	for _, tc := range []struct {
		what string
		c    *compiled
		l    fqdn.Lookup
		want bool
	}{
		{"the same answer", c, fqdn.Lookup{IPs: []netip.Addr{b}, Time: now.Add(29 * time.Second), Targets: []fqdn.Target{{Name: "b.example."}}}, true},
		{"past half the TTL", c, fqdn.Lookup{IPs: []netip.Addr{a}, Time: now.Add(30 * time.Second)}, false},
		{"a new address", c, fqdn.Lookup{IPs: []netip.Addr{a, netip.MustParseAddr("192.0.2.3")}, Time: now}, false},
		{"a new CNAME target", c, fqdn.Lookup{IPs: []netip.Addr{a}, Time: now, Targets: []fqdn.Target{{Name: "c.example."}}}, false},
		{"a new revision", &compiled{run: 1, revision: 5}, fqdn.Lookup{IPs: []netip.Addr{a}, Time: now}, false},
		{"a new agent run", &compiled{run: 2, revision: 4}, fqdn.Lookup{IPs: []netip.Addr{a}, Time: now}, false},
	} {
		if got := told.known(tc.c, k, tc.l); got != tc.want {
			t.Errorf("%s: known %v, want %v", tc.what, got, tc.want)
		}
	}
	if told.known(c, toldKey{ep: 8, addr: k.addr, name: k.name}, fqdn.Lookup{IPs: []netip.Addr{a}, Time: now}) {
		t.Error("another endpoint's answer is known")
	}
}
