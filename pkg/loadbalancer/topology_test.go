package loadbalancer

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// hinted is a ready endpoint at 10.244.0.<n>:8080 on node, hinted for
// the zones and nodes given; tweaks change it further.
func hinted(n byte, node string, zones, nodes []string, tweaks ...func(*Endpoint)) Endpoint {
	e := Endpoint{Address: netip.AddrFrom4([4]byte{10, 244, 0, n}), NodeName: node, Ready: true, Serving: true,
		Ports: map[PortKey]uint16{{Name: "http", Protocol: spec.ProtoTCP}: 8080}, ForZones: zones, ForNodes: nodes}
	for _, t := range tweaks {
		t(&e)
	}
	return e
}

func zones(z ...string) []string { return z }
func nodes(n ...string) []string { return n }

func notReady(e *Endpoint) { e.Ready = false }

// terminating: serving while it terminates.
func terminating(e *Endpoint) { e.Ready, e.Terminating = false, true }

// topoService is a NodePort Service at 10.96.0.1:80 (NodePort 30080);
// tweaks set its policies.
func topoService(tweaks ...func(*Service)) Service {
	s := Service{Name: ServiceName{"default", "web"}, Type: TypeNodePort,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
		Ports:      []Port{{Name: "http", Protocol: spec.ProtoTCP, Port: 80, NodePort: 30080}}}
	for _, t := range tweaks {
		t(&s)
	}
	return s
}

func internalLocal(s *Service) { s.InternalLocal = true }
func externalLocal(s *Service) { s.ExternalLocal = true }

// slots are the last octets of the backends a frontend's scope sends new
// connections to: "10.96.0.1:80" the ClusterIP's, "node:30080" the
// NodePort's at the node's address (its external scope), "node:30080/i"
// its internal one when it has two; missing: the frontend is not there.
func slots(fs []Frontend) map[string][]byte {
	out := map[string][]byte{}
	octets := func(bs []Backend) []byte {
		o := []byte{}
		for _, b := range bs {
			o = append(o, b.Address.As4()[3])
		}
		slices.Sort(o)
		return o
	}
	for _, f := range fs {
		switch {
		case f.Address == netip.MustParseAddr("10.96.0.1"):
			out["10.96.0.1:80"] = octets(f.Slots)
		case f.Address == nodeAddr:
			out["node:30080"] = octets(f.Slots)
			if f.Flags&spec.LBTwoScopes != 0 {
				out["node:30080/i"] = octets(f.InternalSlots)
			}
		}
	}
	return out
}

var nodeAddr = netip.MustParseAddr("192.168.77.1")

// Which backends serve under topology hints, as kube-proxy chooses them
// (its pkg/proxy/topology.go): hints narrow a Cluster policy's backends
// to the node's, or else the zone's, only when every ready endpoint is
// hinted and one is near; a Local policy ignores them.
func TestTopology(t *testing.T) {
	a, b, c := zones("zone-a"), zones("zone-b"), zones("zone-c")
	for _, tc := range []struct {
		name  string
		svc   Service
		zone  string // node-a's
		eps   []Endpoint
		want  map[string][]byte
		ideal []byte // the Backends the datapath holds, when not the slots
	}{{
		name: "hints used: the zone's endpoints alone, wherever their node",
		svc:  topoService(), zone: "zone-a",
		eps: []Endpoint{hinted(1, "node-a", a, nil), hinted(2, "node-b", b, nil), hinted(3, "node-c", c, nil),
			hinted(4, "node-d", a, nil)},
		want: map[string][]byte{"10.96.0.1:80": {1, 4}, "node:30080": {1, 4}},
	}, {
		name: "an endpoint without hints: all of them",
		svc:  topoService(), zone: "zone-a",
		eps:  []Endpoint{hinted(1, "node-a", a, nil), hinted(2, "node-b", b, nil), hinted(3, "node-c", nil, nil)},
		want: map[string][]byte{"10.96.0.1:80": {1, 2, 3}, "node:30080": {1, 2, 3}},
	}, {
		name: "the node has no zone: all of them",
		svc:  topoService(), zone: "",
		eps:  []Endpoint{hinted(1, "node-a", a, nil), hinted(2, "node-b", b, nil)},
		want: map[string][]byte{"10.96.0.1:80": {1, 2}, "node:30080": {1, 2}},
	}, {
		name: "no endpoint for the node's zone: all of them",
		svc:  topoService(), zone: "zone-d",
		eps:  []Endpoint{hinted(1, "node-a", a, nil), hinted(2, "node-b", b, nil)},
		want: map[string][]byte{"10.96.0.1:80": {1, 2}, "node:30080": {1, 2}},
	}, {
		name: "an endpoint hinted for no zone matches a node without one",
		svc:  topoService(), zone: "",
		eps:  []Endpoint{hinted(1, "node-a", zones(""), nil), hinted(2, "node-b", b, nil)},
		want: map[string][]byte{"10.96.0.1:80": {1}, "node:30080": {1}},
	}, {
		name: "an endpoint hinted for several zones serves each",
		svc:  topoService(), zone: "zone-c",
		eps: []Endpoint{hinted(1, "node-a", zones("zone-a", "zone-c"), nil), hinted(2, "node-b", zones("zone-b", "zone-d"), nil),
			hinted(3, "node-c", c, nil)},
		want: map[string][]byte{"10.96.0.1:80": {1, 3}, "node:30080": {1, 3}},
	}, {
		name: "an unready endpoint needs no hint and is not near",
		svc:  topoService(), zone: "zone-a",
		eps: []Endpoint{hinted(1, "node-a", a, nil), hinted(2, "node-b", b, nil), hinted(3, "node-c", nil, nil, notReady),
			hinted(4, "node-d", a, nil, notReady)},
		want: map[string][]byte{"10.96.0.1:80": {1}, "node:30080": {1}},
	}, {
		name: "only unready endpoints in the zone: all the ready ones",
		svc:  topoService(), zone: "zone-a",
		eps:  []Endpoint{hinted(1, "node-a", a, nil, notReady), hinted(2, "node-b", b, nil), hinted(3, "node-c", c, nil)},
		want: map[string][]byte{"10.96.0.1:80": {2, 3}, "node:30080": {2, 3}},
	}, {
		name: "none ready: those serving while they terminate, wherever they are",
		svc:  topoService(), zone: "zone-a",
		eps: []Endpoint{hinted(1, "node-a", a, nil, terminating), hinted(2, "node-b", b, nil, terminating),
			hinted(3, "node-c", nil, nil, terminating)},
		want: map[string][]byte{"10.96.0.1:80": {1, 2, 3}, "node:30080": {1, 2, 3}},
	}, {
		name: "the zone's ready ones, and the terminating ones keep their connections",
		svc:  topoService(), zone: "zone-a",
		eps: []Endpoint{hinted(1, "node-a", a, nil), hinted(2, "node-b", b, nil),
			hinted(3, "node-a", nil, nil, terminating)},
		want:  map[string][]byte{"10.96.0.1:80": {1}, "node:30080": {1}},
		ideal: []byte{1, 3},
	}, {
		name: "PreferSameNode: node hints win over zone hints",
		svc:  topoService(), zone: "zone-a",
		eps: []Endpoint{hinted(1, "node-a", a, nodes("node-a")), hinted(2, "node-b", a, nodes("node-b")),
			hinted(3, "node-c", b, nodes("node-c"))},
		want: map[string][]byte{"10.96.0.1:80": {1}, "node:30080": {1}},
	}, {
		name: "PreferSameNode: nothing for the node, the zone then",
		svc:  topoService(), zone: "zone-a",
		eps:  []Endpoint{hinted(2, "node-b", a, nodes("node-b")), hinted(3, "node-c", b, nodes("node-c"))},
		want: map[string][]byte{"10.96.0.1:80": {2}, "node:30080": {2}},
	}, {
		name: "PreferSameNode: an endpoint without a node hint, the zone then",
		svc:  topoService(), zone: "zone-a",
		eps: []Endpoint{hinted(1, "node-a", a, nodes("node-a")), hinted(2, "node-b", a, nil),
			hinted(3, "node-c", b, nodes("node-c"))},
		want: map[string][]byte{"10.96.0.1:80": {1, 2}, "node:30080": {1, 2}},
	}, {
		name: "PreferSameNode: nothing for the node or its zone, all of them",
		svc:  topoService(), zone: "zone-d",
		eps:  []Endpoint{hinted(2, "node-b", a, nodes("node-b")), hinted(3, "node-c", b, nodes("node-c"))},
		want: map[string][]byte{"10.96.0.1:80": {2, 3}, "node:30080": {2, 3}},
	}, {
		name: "PreferSameNode without zones: the node's",
		svc:  topoService(), zone: "",
		eps:  []Endpoint{hinted(1, "node-a", nil, nodes("node-a")), hinted(2, "node-b", nil, nodes("node-b"))},
		want: map[string][]byte{"10.96.0.1:80": {1}, "node:30080": {1}},
	}, {
		name: "internalTrafficPolicy Local: the node's endpoints whatever their hints; outside clients the zone's",
		svc:  topoService(internalLocal), zone: "zone-a",
		eps: []Endpoint{hinted(1, "node-a", a, nil), hinted(2, "node-a", b, nil), hinted(3, "node-c", a, nil),
			hinted(4, "node-d", c, nil)},
		want:  map[string][]byte{"10.96.0.1:80": {1, 2}, "node:30080": {1, 3}, "node:30080/i": {1, 2}},
		ideal: []byte{1, 2, 3},
	}, {
		name: "internalTrafficPolicy Local, no endpoint on the node: none, though the zone has some",
		svc:  topoService(internalLocal), zone: "zone-a",
		eps:   []Endpoint{hinted(3, "node-c", a, nil), hinted(4, "node-d", c, nil)},
		want:  map[string][]byte{"10.96.0.1:80": {}, "node:30080": {3}, "node:30080/i": {}},
		ideal: []byte{3},
	}, {
		name: "externalTrafficPolicy Local: outside clients the node's endpoints whatever their hints, the node's own the zone's",
		svc:  topoService(externalLocal), zone: "zone-a",
		eps: []Endpoint{hinted(1, "node-a", a, nil), hinted(2, "node-a", b, nil), hinted(3, "node-c", a, nil),
			hinted(4, "node-d", b, nil)},
		want:  map[string][]byte{"10.96.0.1:80": {1, 3}, "node:30080": {1, 2}, "node:30080/i": {1, 3}},
		ideal: []byte{1, 2, 3},
	}, {
		name: "both policies Local: hints play no part",
		svc:  topoService(internalLocal, externalLocal), zone: "zone-a",
		eps:  []Endpoint{hinted(1, "node-a", b, nil), hinted(3, "node-c", a, nil)},
		want: map[string][]byte{"10.96.0.1:80": {1}, "node:30080": {1}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := Frontends(tc.svc, tc.eps, Local{NodeName: "node-a", Zone: tc.zone, Addresses: []netip.Addr{nodeAddr}})
			got := slots(fs)
			for k, w := range tc.want {
				if g, ok := got[k]; !ok || !slices.Equal(g, w) {
					t.Errorf("%s: slots %v, want %v", k, g, w)
				}
			}
			for k := range got {
				if _, ok := tc.want[k]; !ok {
					t.Errorf("%s: unexpected slots %v", k, got[k])
				}
			}
			ideal := tc.ideal
			if ideal == nil {
				ideal = tc.want["10.96.0.1:80"]
			}
			for _, f := range fs {
				var bs []byte
				for _, b := range f.Backends {
					bs = append(bs, b.Address.As4()[3])
				}
				if f.Address != spec.AnyNode && !slices.Equal(bs, ideal) {
					t.Errorf("%s: backends %v, want %v", f.Addr, bs, ideal)
				}
			}
		})
	}
}
