package loadbalancer

import (
	"fmt"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

var (
	t0     = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	t1     = t0.Add(time.Hour)
	claimA = Claim{Service: ServiceName{"default", "a"}, CreationTime: t1, UID: "uid-a"}
	claimB = Claim{Service: ServiceName{"default", "b"}, CreationTime: t0, UID: "uid-b"}
	claimC = Claim{Service: ServiceName{"other", "c"}, CreationTime: t0, UID: "uid-0"}
	// claimD is a ClusterIP, the youngest of them.
	claimD = Claim{Service: ServiceName{"default", "d"}, ClusterIP: true, CreationTime: t1.Add(time.Hour), UID: "uid-d"}
)

func TestOwner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		claims  []Claim
		holders []ServiceName
		want    string // "" for nobody
	}{
		{"alone", []Claim{claimA}, nil, "default/a"},
		{"the older wins", []Claim{claimA, claimB}, nil, "default/b"},
		{"as old: the lower UID wins", []Claim{claimB, claimC}, nil, "other/c"},
		{"without time or UID: by name", []Claim{{Service: ServiceName{"b", "x"}}, {Service: ServiceName{"a", "y"}}}, nil, "a/y"},
		{"a ClusterIP beats older ExternalIPs", []Claim{claimA, claimB, claimD}, []ServiceName{claimD.Service}, "default/d"},
		{"at a ClusterIP only its holder may serve", []Claim{claimA, claimB}, []ServiceName{claimD.Service}, ""},
		{"a holder's other kinds may", []Claim{claimB, {Service: claimD.Service, CreationTime: claimD.CreationTime}},
			[]ServiceName{claimD.Service}, "default/d"},
		{"none", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every order of the claims gives the same owner.
			for _, cs := range permutations(tc.claims) {
				got := ""
				if o, ok := Owner(cs, tc.holders); ok {
					got = o.Service.String()
				}
				if got != tc.want {
					t.Fatalf("claims %v: owner %q, want %q", cs, got, tc.want)
				}
			}
		})
	}
}

func permutations[T any](xs []T) [][]T {
	if len(xs) <= 1 {
		return [][]T{append([]T(nil), xs...)}
	}
	var out [][]T
	for i := range xs {
		rest := append(append([]T(nil), xs[:i]...), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]T{xs[i]}, p...))
		}
	}
	return out
}

// contested are Services that claim each other's frontends: an ExternalIP
// two of them name, one of them younger; an ExternalIP that is another's
// ClusterIP, named by a Service older than the ClusterIP's; a NodePort
// that a pod's hostPort names too.
func contested() []Service {
	ip := netip.MustParseAddr
	tcp80 := []Port{{Name: "http", Protocol: spec.ProtoTCP, Port: 80}}
	return []Service{
		{Name: ServiceName{"default", "young"}, Type: TypeClusterIP, ClusterIPs: []netip.Addr{ip("10.96.0.1")},
			ExternalIPs: []netip.Addr{ip("203.0.113.10")}, Ports: tcp80, CreationTime: t1, UID: "uid-young"},
		{Name: ServiceName{"default", "old"}, Type: TypeClusterIP, ClusterIPs: []netip.Addr{ip("10.96.0.2")},
			ExternalIPs: []netip.Addr{ip("203.0.113.10")}, Ports: tcp80, CreationTime: t0, UID: "uid-old"},
		{Name: ServiceName{"default", "thief"}, Type: TypeClusterIP, ClusterIPs: []netip.Addr{ip("10.96.0.3")},
			ExternalIPs: []netip.Addr{ip("10.96.0.2"), ip("10.96.0.4")}, Ports: tcp80,
			CreationTime: t0.Add(-time.Hour), UID: "uid-thief"},
		{Name: ServiceName{"default", "dns"}, Type: TypeClusterIP, ClusterIPs: []netip.Addr{ip("10.96.0.4")},
			Ports: []Port{{Name: "dns", Protocol: spec.ProtoUDP, Port: 53}}, CreationTime: t1, UID: "uid-dns"},
		{Name: ServiceName{"default", "np"}, Type: TypeNodePort, ClusterIPs: []netip.Addr{ip("10.96.0.5")},
			Ports: []Port{{Name: "http", Protocol: spec.ProtoTCP, Port: 80, NodePort: 30080}}, CreationTime: t1, UID: "uid-np"},
		{Name: HostPortName("default", "pod"), Type: TypeHostPort, Ports: []Port{{Name: "30080", Protocol: spec.ProtoTCP, Port: 30080}},
			CreationTime: t0, UID: "uid-pod"},
	}
}

// Services arriving in any order, one at a time as after a restart or
// on different nodes, leave every frontend with the same service.
func TestOwnershipEveryOrder(t *testing.T) {
	svcs := contested()
	var want map[Addr]ServiceName
	for _, order := range permutations(svcs) {
		got := ownersAfter(t, order)
		if want == nil {
			want = got
			for a, n := range got {
				t.Logf("%s: %s", a, n)
			}
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("order %v: owners\n%v\nwant\n%v", names(order), got, want)
		}
	}
	ip := netip.MustParseAddr
	for a, n := range map[Addr]string{
		{Address: ip("203.0.113.10"), Port: 80, Protocol: spec.ProtoTCP}:    "default/old",
		{Address: ip("10.96.0.2"), Port: 80, Protocol: spec.ProtoTCP}:       "default/old",
		{Address: ip("10.96.0.4"), Port: 80, Protocol: spec.ProtoTCP}:       "",
		{Address: ip("192.168.77.1"), Port: 30080, Protocol: spec.ProtoTCP}: "default/hostport:pod",
	} {
		if got, ok := want[a]; (n == "" && ok) || (n != "" && got.String() != n) {
			t.Errorf("%s is %q's, want %q's", a, got, n)
		}
	}
}

func names(svcs []Service) []string {
	var out []string
	for _, s := range svcs {
		out = append(out, s.Name.String())
	}
	return out
}

// ownersAfter adds the services one pass at a time and returns who has
// each frontend.
func ownersAfter(t *testing.T, order []Service) map[Addr]ServiceName {
	t.Helper()
	db := statedb.New()
	tables, err := NewTables(db)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeServices{svcs: map[ServiceName]Service{}, eps: map[ServiceName][]Endpoint{}}
	local := Local{NodeName: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.77.1")}}
	c, err := newController(db, tables, local, src.intake(), slog.New(slog.DiscardHandler), limitsOf(65536))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range order {
		src.svcs[s.Name] = s
		if err := c.process(db.ReadTxn(), []ServiceName{s.Name}, false); err != nil {
			t.Fatal(err)
		}
	}
	out := map[Addr]ServiceName{}
	for r := range tables.Frontends.All(db.ReadTxn()) {
		out[r.Addr] = r.Service
	}
	return out
}

// fakeEvents records warnings.
type fakeEvents []string

func (e *fakeEvents) Warn(n ServiceName, reason, message string) {
	*e = append(*e, fmt.Sprintf("%s %s: %s", n, reason, message))
}

// A younger Service that came first loses the frontend to an older one
// when that arrives, is warned, and has the frontend back when the older
// one goes; the backends follow the frontend.
func TestOlderServiceTakesFrontend(t *testing.T) {
	db := statedb.New()
	tables, err := NewTables(db)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeServices{svcs: map[ServiceName]Service{}, eps: map[ServiceName][]Endpoint{}}
	c, err := newController(db, tables, Local{NodeName: "node-a"}, src.intake(), slog.New(slog.DiscardHandler), limitsOf(65536))
	if err != nil {
		t.Fatal(err)
	}
	var events fakeEvents
	c.events = &events
	svcs := contested()
	young, old := svcs[0], svcs[1]
	ext := Addr{Address: netip.MustParseAddr("203.0.113.10"), Port: 80, Protocol: spec.ProtoTCP}
	add := func(s Service, backend string) {
		src.svcs[s.Name] = s
		src.eps[s.Name] = []Endpoint{{Address: netip.MustParseAddr(backend), Ready: true, Serving: true,
			Ports: map[PortKey]uint16{{Name: "http", Protocol: spec.ProtoTCP}: 8080}}}
		if err := c.process(db.ReadTxn(), []ServiceName{s.Name}, false); err != nil {
			t.Fatal(err)
		}
	}
	holder := func(want ServiceName, backend string) {
		t.Helper()
		txn := db.ReadTxn()
		r, _, ok := tables.Frontends.Get(txn, FrontendAddrIndex.Query(ext))
		if !ok || r.Service != want || len(r.Backends) != 1 || r.Backends[0].Address != netip.MustParseAddr(backend) {
			t.Fatalf("%s: %+v, want %s's with backend %s", ext, r, want, backend)
		}
		// Each service's ClusterIP frontend and the contested one: one
		// backend each, counted by the frontends that use them.
		for b := range tables.Backends.All(txn) {
			a := Addr{Address: b.Address, Port: b.Port, Protocol: b.Protocol}
			if c.backendRefs[a] == 0 {
				t.Fatalf("backend %s in the table, used by no frontend", a)
			}
		}
	}

	add(young, "10.244.1.1")
	holder(young.Name, "10.244.1.1")
	add(old, "10.244.2.1")
	holder(old.Name, "10.244.2.1")
	if len(events) != 1 || events[0] != "default/young FrontendConflict: frontends not served for this Service: "+
		"203.0.113.10:80/TCP: the older Service default/old has it" {
		t.Fatalf("events %q", events)
	}
	if c.backendRefs[Addr{Address: netip.MustParseAddr("10.244.1.1"), Port: 8080, Protocol: spec.ProtoTCP}] != 1 {
		t.Fatalf("young's backend counts %v, want 1 (its ClusterIP)", c.backendRefs)
	}
	delete(src.svcs, old.Name)
	if err := c.process(db.ReadTxn(), []ServiceName{old.Name}, false); err != nil {
		t.Fatal(err)
	}
	holder(young.Name, "10.244.1.1")
	if len(events) != 1 {
		t.Fatalf("events %q", events)
	}
}
