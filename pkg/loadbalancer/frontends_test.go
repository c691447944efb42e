package loadbalancer

import (
	"net/netip"
	"slices"
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

// HostPorts are where portmap maps them: an unset hostIP at every node
// address and the loopback, a hostIP at itself when the node has it
// (any of its addresses) or it is a loopback address, nowhere else. Only
// a HostPort gets a loopback frontend: an ExternalIP there is refused
// (TestExternalIPsNeverSpecial).
func TestHostPortAddresses(t *testing.T) {
	a, b := netip.MustParseAddr("192.168.77.1"), netip.MustParseAddr("10.9.0.1")
	local := Local{NodeName: "node-a", Addresses: []netip.Addr{a, b}}
	for _, tc := range []struct {
		hostIP string
		want   []string
	}{
		{"", []string{"10.9.0.1", "127.0.0.1", "192.168.77.1"}},
		{"0.0.0.0", []string{"10.9.0.1", "127.0.0.1", "192.168.77.1"}},
		{"10.9.0.1", []string{"10.9.0.1"}},
		{"192.168.77.1", []string{"192.168.77.1"}},
		{"127.0.0.1", []string{"127.0.0.1"}},
		{"127.0.0.2", []string{"127.0.0.2"}},
		{"203.0.113.10", nil},
	} {
		var hostIP netip.Addr
		if tc.hostIP != "" {
			hostIP = netip.MustParseAddr(tc.hostIP)
		}
		svc := Service{Name: HostPortName("default", "web"), Type: TypeHostPort,
			Ports: []Port{{Name: "8080", Protocol: spec.ProtoTCP, Port: 8080, HostIP: hostIP}}}
		eps := []Endpoint{{Address: netip.MustParseAddr("10.244.1.5"), NodeName: "node-a", Ready: true, Serving: true,
			Ports: map[PortKey]uint16{{Name: "8080", Protocol: spec.ProtoTCP}: 80}}}
		var got []string
		for _, f := range Frontends(svc, eps, local) {
			got = append(got, f.Address.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("hostIP %q: frontends at %v, want %v", tc.hostIP, got, tc.want)
		}
	}
}

// The datapath holds each range once, and none that another holds.
func TestSourceRanges(t *testing.T) {
	ps := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, tt := range []struct {
		in, want []netip.Prefix
	}{
		{nil, nil},
		{ps("10.1.0.0/16", "10.0.0.0/8", "10.0.0.0/8"), ps("10.0.0.0/8")},
		{ps("192.0.2.7/24", "192.0.2.128/25", "192.0.3.0/24"), ps("192.0.2.0/24", "192.0.3.0/24")},
		{ps("10.0.0.1/32", "10.0.0.0/31", "9.255.255.255/32"), ps("9.255.255.255/32", "10.0.0.0/31")},
		{ps("2001:db8::/64", "0.0.0.0/0", "10.0.0.0/8"), ps("0.0.0.0/0")},
	} {
		if got := SourceRanges(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("SourceRanges(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
