package loadbalancer

import (
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// ExternalIPs are the Service author's to write: addresses no Service may
// own never become frontends, the others do.
func TestExternalIPsNeverSpecial(t *testing.T) {
	var ips []netip.Addr
	for _, s := range []string{"169.254.42.1", "127.0.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "169.254.1.1", "203.0.113.10"} {
		ips = append(ips, netip.MustParseAddr(s))
	}
	svc := Service{Name: ServiceName{"default", "greedy"}, Type: TypeClusterIP, ExternalIPs: ips,
		Ports: []Port{{Protocol: spec.ProtoTCP, Port: 80}}}
	eps := []Endpoint{{Address: netip.MustParseAddr("10.244.1.5"), Ready: true, Serving: true,
		Ports: map[PortKey]uint16{{Protocol: spec.ProtoTCP}: 8080}}}
	fs := Frontends(svc, eps, Local{NodeName: "node-a"})
	if len(fs) != 1 || fs[0].Address != netip.MustParseAddr("203.0.113.10") {
		t.Fatalf("frontends %v, want 203.0.113.10:80 alone", fs)
	}
}
