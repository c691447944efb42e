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

// Maglev serves the frontends that clients from outside reach, never a
// HostPort, a ClusterIP or the NodePort at any node's address (local
// clients), and the annotation overrides the agent's algorithm only when
// the agent lets it and it names one.
func TestMaglevFrontends(t *testing.T) {
	node := netip.MustParseAddr("192.168.77.1")
	eps := []Endpoint{{Address: netip.MustParseAddr("10.244.1.5"), NodeName: "node-a", Ready: true, Serving: true,
		Ports: map[PortKey]uint16{{Name: "http", Protocol: spec.ProtoTCP}: 8080}}}
	lb := Service{Name: ServiceName{"default", "lb"}, Type: TypeLoadBalancer,
		ClusterIPs:      []netip.Addr{netip.MustParseAddr("10.96.0.5")},
		ExternalIPs:     []netip.Addr{netip.MustParseAddr("203.0.113.5")},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.51.100.5")},
		Ports:           []Port{{Name: "http", Protocol: spec.ProtoTCP, Port: 80, NodePort: 30080}}}
	maglevAt := func(s Service, local Local) []string {
		local.NodeName, local.Addresses = "node-a", []netip.Addr{node}
		var out []string
		for _, f := range Frontends(s, eps, local) {
			if f.Flags&spec.LBMaglev != 0 {
				out = append(out, f.Addr.String())
			}
		}
		return out
	}
	outside := []string{"192.168.77.1:30080/TCP", "198.51.100.5:80/TCP", "203.0.113.5:80/TCP"}
	annotated := func(alg string) Service { s := lb; s.Algorithm = alg; return s }
	for _, tc := range []struct {
		name  string
		svc   Service
		local Local
		want  []string
	}{
		{"random by default", lb, Local{Algorithm: AlgorithmRandom}, nil},
		{"maglev for outside clients", lb, Local{Algorithm: AlgorithmMaglev}, outside},
		{"an annotation the agent does not read", annotated("maglev"), Local{Algorithm: AlgorithmRandom}, nil},
		{"an annotation asks for maglev", annotated("maglev"), Local{Algorithm: AlgorithmRandom, AlgorithmAnnotation: true}, outside},
		{"an annotation asks for random", annotated("random"), Local{Algorithm: AlgorithmMaglev, AlgorithmAnnotation: true}, nil},
		{"an annotation that names nothing", annotated("ring"), Local{Algorithm: AlgorithmMaglev, AlgorithmAnnotation: true}, outside},
	} {
		if got := maglevAt(tc.svc, tc.local); !slices.Equal(got, tc.want) {
			t.Errorf("%s: maglev at %v, want %v", tc.name, got, tc.want)
		}
	}
	hp := Service{Name: HostPortName("default", "web"), Type: TypeHostPort,
		Ports: []Port{{Name: "http", Protocol: spec.ProtoTCP, Port: 8080}}}
	if got := maglevAt(hp, Local{Algorithm: AlgorithmMaglev}); got != nil {
		t.Errorf("HostPort frontends with maglev: %v", got)
	}
	if why := (Local{Algorithm: AlgorithmMaglev, AlgorithmAnnotation: true}).BadAlgorithm(annotated("ring")); why == "" {
		t.Error("an annotation that names nothing is not reported")
	}
}
