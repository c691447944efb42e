package loadbalancer

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// oneService is an intake holding one Service with two ports and two
// endpoints.
var oneService = &Intake{NodeName: "node-a", Service: func(_ statedb.ReadTxn, n ServiceName) (Service, []Endpoint, bool) {
	svc := Service{Name: n, Type: TypeClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.5")},
		Ports: []Port{{Name: "http", Protocol: spec.ProtoTCP, Port: 80}, {Name: "alt", Protocol: spec.ProtoTCP, Port: 81}}}
	var eps []Endpoint
	for _, a := range []string{"10.244.1.5", "10.244.2.5"} {
		eps = append(eps, Endpoint{Address: netip.MustParseAddr(a), Ready: true, Serving: true,
			Ports: map[PortKey]uint16{{Name: "http", Protocol: spec.ProtoTCP}: 8080, {Name: "alt", Protocol: spec.ProtoTCP}: 8081}})
	}
	return svc, eps, true
}}

// A service whose numbers run out half-way is refused: nothing of it
// lands, in the tables or in the controller's counts, the numbers handed
// out for it go back, and once numbers free it is written whole.
func TestRefusedServiceLandsNothing(t *testing.T) {
	db := statedb.New()
	tables, err := NewTables(db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newController(db, tables, Local{NodeName: "node-a"}, oneService, slog.New(slog.DiscardHandler), limitsOf(65536))
	if err != nil {
		t.Fatal(err)
	}
	// One reverse NAT index is free: the first frontend is numbered, the
	// second cannot be.
	for i := 2; i <= 0xffff; i++ {
		c.ids.revNATs.take(Addr{Address: netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)}), Port: 1, Protocol: 6}, uint16(i))
	}
	names := []ServiceName{{"default", "web"}}
	if err := c.process(db.ReadTxn(), names, false); err != nil {
		t.Fatal(err)
	}
	if c.refused[names[0]].key == "" {
		t.Fatal("a service without reverse NAT indexes to give was not refused")
	}
	if n := tables.Frontends.NumObjects(db.ReadTxn()); n != 0 || len(c.backendRefs) != 0 || c.room.used != (usage{}) {
		t.Fatalf("after the refusal: %d frontends, backend counts %v, room used %+v", n, c.backendRefs, c.room.used)
	}
	if n, m := len(c.ids.revNATs.byAddr), len(c.ids.backends.byAddr); n != 0xffff-1 || m != 0 {
		t.Fatalf("after the refusal the pools hold %d reverse NAT indexes (want the %d taken before) and %d backend ids",
			n, 0xffff-1, m)
	}
	c.ids.revNATs.release(Addr{Address: netip.AddrFrom4([4]byte{192, 0, 0, 2}), Port: 1, Protocol: 6})
	if err := c.process(db.ReadTxn(), names, false); err != nil {
		t.Fatal(err)
	}
	if n := tables.Backends.NumObjects(db.ReadTxn()); n != 4 || len(c.backendRefs) != 4 || c.refused[names[0]].key != "" {
		t.Fatalf("after the pass: %d backends, counts %v, refused %q", n, c.backendRefs, c.refused[names[0]].key)
	}
	if want := (usage{services: 2 + 4, backends: 4, revNATs: 2}); c.room.used != want {
		t.Fatalf("room used %+v, want %+v", c.room.used, want)
	}
}

// fakeServices holds Services that a test changes, which its intake
// reads: the controller's passes are tested here, its following of
// tables with the Kubernetes tables in intake_test.go.
type fakeServices struct {
	svcs map[ServiceName]Service
	eps  map[ServiceName][]Endpoint
}

func (s *fakeServices) intake() *Intake {
	return &Intake{NodeName: "node-a", Service: func(_ statedb.ReadTxn, n ServiceName) (Service, []Endpoint, bool) {
		svc, ok := s.svcs[n]
		return svc, s.eps[n], ok
	}}
}

// put adds a ClusterIP Service with port 80 and a ready endpoint at each
// of backends, port 8080.
func (s *fakeServices) put(name, clusterIP string, backends ...string) ServiceName {
	n := ServiceName{"default", name}
	s.svcs[n] = Service{Name: n, Type: TypeClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr(clusterIP)},
		Ports: []Port{{Protocol: spec.ProtoTCP, Port: 80}}}
	s.eps[n] = nil
	for _, b := range backends {
		s.eps[n] = append(s.eps[n], Endpoint{Address: netip.MustParseAddr(b), Ready: true, Serving: true,
			Ports: map[PortKey]uint16{{Protocol: spec.ProtoTCP}: 8080}})
	}
	return n
}

// What a deleted service let go of is free once the kernel lets go of it
// too: its room and numbers stay taken until the reconcilers have passed
// the deletion, then a refused service that fits now is tried again and
// written, and the pools hold the numbers of the rows alone.
func TestRoomFreedOnceReconciled(t *testing.T) {
	db := statedb.New()
	tables, err := NewTables(db)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeServices{svcs: map[ServiceName]Service{}, eps: map[ServiceName][]Endpoint{}}
	// Room for two frontends of two backends each.
	c, err := newController(db, tables, Local{NodeName: "node-a"}, src.intake(), slog.New(slog.DiscardHandler),
		usage{services: 6, backends: 4, revNATs: 2})
	if err != nil {
		t.Fatal(err)
	}
	gate, reached := make(chan struct{}), make(chan struct{}, 2)
	wait := func(ctx context.Context, _ statedb.Revision) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.frontendsDone, c.backendsDone = newProgress(wait), newProgress(wait)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, f := range []*progress{c.frontendsDone, c.backendsDone} {
		go f.run(ctx, func() { reached <- struct{}{} })
	}

	web := src.put("web", "10.96.0.5", "10.244.1.5", "10.244.1.6")
	api := src.put("api", "10.96.0.6", "10.244.2.5", "10.244.2.6")
	if err := c.process(db.ReadTxn(), []ServiceName{web, api}, false); err != nil {
		t.Fatal(err)
	}
	late := src.put("late", "10.96.0.7", "10.244.3.5")
	if err := c.process(db.ReadTxn(), []ServiceName{late}, false); err != nil {
		t.Fatal(err)
	}
	if c.refused[late].key == "" {
		t.Fatal("late fits in full maps")
	}

	delete(src.svcs, web)
	if err := c.process(db.ReadTxn(), []ServiceName{web}, false); err != nil {
		t.Fatal(err)
	}
	if why, _ := c.room.fit(usage{revNATs: 1}); c.refused[late].key == "" || why == "" {
		t.Fatalf("web's room is free before the kernel let go of it: %+v", c.room)
	}
	if len(c.ids.revNATs.byAddr) != 2 || len(c.ids.backends.byAddr) != 4 {
		t.Fatalf("web's numbers are free before the kernel let go of them: %v %v", c.ids.revNATs.byAddr, c.ids.backends.byAddr)
	}

	// The reconcilers pass the deletion.
	close(gate)
	for range 2 {
		select {
		case <-reached:
		case <-time.After(10 * time.Second):
			t.Fatal("the followers did not report the reconcilers' progress")
		}
	}
	c.settle()
	if len(c.ids.revNATs.byAddr) != 1 || len(c.ids.backends.byAddr) != 2 {
		t.Fatalf("web's numbers are still taken: %v %v", c.ids.revNATs.byAddr, c.ids.backends.byAddr)
	}
	names := c.takePending()
	if len(names) != 1 || names[0] != late {
		t.Fatalf("tried again: %v, want the refused %s", names, late)
	}
	if err := c.process(db.ReadTxn(), names, false); err != nil {
		t.Fatal(err)
	}
	if c.refused[late].key != "" {
		t.Fatalf("late still refused: %s", c.refused[late].key)
	}
	txn := db.ReadTxn()
	if f, b := tables.Frontends.NumObjects(txn), tables.Backends.NumObjects(txn); f != 2 || b != 3 ||
		len(c.ids.revNATs.byAddr) != 2 || len(c.ids.backends.byAddr) != 3 {
		t.Fatalf("%d frontends, %d backends; pools %v %v", f, b, c.ids.revNATs.byAddr, c.ids.backends.byAddr)
	}
	if want := (usage{services: 3 + 2, backends: 3, revNATs: 2}); c.room.used != want {
		t.Fatalf("room used %+v, want %+v", c.room.used, want)
	}
}
