package loadbalancer

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// oneService is a Source holding one Service with two ports and two
// endpoints.
type oneService struct{}

func (oneService) Start(context.Context) error { return nil }
func (oneService) OnChange(func(ServiceName))  {}
func (oneService) NodeName() string            { return "node-a" }
func (oneService) Services() []ServiceName     { return []ServiceName{{"default", "web"}} }
func (oneService) Service(n ServiceName) (Service, []Endpoint, bool) {
	svc := Service{Name: n, Type: TypeClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.5")},
		Ports: []Port{{Name: "http", Protocol: spec.ProtoTCP, Port: 80}, {Name: "alt", Protocol: spec.ProtoTCP, Port: 81}}}
	var eps []Endpoint
	for _, a := range []string{"10.244.1.5", "10.244.2.5"} {
		eps = append(eps, Endpoint{Address: netip.MustParseAddr(a), Ready: true, Serving: true,
			Ports: map[PortKey]uint16{{Name: "http", Protocol: spec.ProtoTCP}: 8080, {Name: "alt", Protocol: spec.ProtoTCP}: 8081}})
	}
	return svc, eps, true
}

// A pass that fails half-way lands nothing, in the tables or in the
// controller's count of backends, and the next pass writes it whole.
func TestFailedPassLandsNothing(t *testing.T) {
	db := statedb.New()
	tables, err := NewTables(db)
	if err != nil {
		t.Fatal(err)
	}
	c := newController(db, tables, Local{NodeName: "node-a"}, oneService{}, slog.New(slog.DiscardHandler))
	// One reverse NAT index is free: the first frontend is numbered and
	// counts its backends, the second cannot be.
	for i := 2; i <= 0xffff; i++ {
		c.ids.revNATs.take(Addr{Address: netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)}), Port: 1, Protocol: 6}, uint16(i))
	}
	names := []ServiceName{{"default", "web"}}
	if err := c.process(names, false); err == nil {
		t.Fatal("a pass without a reverse NAT index to give succeeded")
	}
	if n := tables.Frontends.NumObjects(db.ReadTxn()); n != 0 || len(c.backendRefs) != 0 {
		t.Fatalf("after the failed pass: %d frontends, backend counts %v", n, c.backendRefs)
	}
	c.ids.revNATs.release(Addr{Address: netip.AddrFrom4([4]byte{192, 0, 0, 2}), Port: 1, Protocol: 6})
	if err := c.process(names, false); err != nil {
		t.Fatal(err)
	}
	if n := tables.Backends.NumObjects(db.ReadTxn()); n != 4 || len(c.backendRefs) != 4 {
		t.Fatalf("after the pass: %d backends, counts %v", n, c.backendRefs)
	}
}
