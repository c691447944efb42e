package loadbalancer_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
	"github.com/cilium-go/cilium/pkg/loadbalancer/lbtest"
)

// The controller does not run before the service maps are open: until
// then nothing is written and the tables stay uninitialized (so that the
// reconcilers prune nothing), and its health says why. Once they open,
// its first run takes over the numbers they hold, so that the
// connections of an earlier agent keep their frontend's reverse NAT
// index and their backend's id.
func TestRunWaitsForMaps(t *testing.T) {
	m := lbtest.New()
	web := spec.Frontend{Address: netip.MustParseAddr("10.96.0.5"), Port: 1, Protocol: spec.ProtoTCP}
	held := spec.Backend{ID: 9, Address: netip.MustParseAddr("10.244.1.5"), Port: 8080, Protocol: spec.ProtoTCP}
	for _, err := range []error{
		m.UpsertBackend(held),
		m.UpsertService(spec.Service{Frontend: web, Backends: []spec.BackendID{held.ID}, RevNATIndex: 7}),
		m.UpsertRevNAT(spec.RevNAT{Index: 7, Address: web.Address, Port: web.Port}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var opened atomic.Bool
	source := func() loadbalancer.Map {
		if opened.Load() {
			return m
		}
		return nil
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lb := startLBWith(t, m, source, []runtime.Object{service("web", "10.96.0.5", 1, 0, 0, t0),
		slice("web", "10.244.1.5", "10.244.1.6")}, lbk8s.Cell)

	testenv.Eventually(t, time.Minute, func() error {
		for _, s := range lb.health.All() {
			if s.Scope == "loadbalancer.job-loadbalancer" {
				if s.Level != cell.StatusDegraded || !strings.Contains(s.Error, "not open") {
					return fmt.Errorf("the controller's health is %s (%q), want degraded by the maps not open", s.Level, s.Error)
				}
				return nil
			}
		}
		return errors.New("no health from the controller yet")
	})
	txn := lb.db.ReadTxn()
	if n := lb.frontends.NumObjects(txn); n != 0 {
		t.Fatalf("%d frontends written before the maps opened", n)
	}
	if init, _ := lb.frontends.Initialized(txn); init {
		t.Fatal("the frontends table is initialized before the maps opened")
	}

	opened.Store(true)
	lb.waitWritten(t, "web", 1)
	txn = lb.db.ReadTxn()
	r, _, ok := lb.frontends.Get(txn, loadbalancer.FrontendAddrIndex.Query(loadbalancer.Addr{
		Address: web.Address, Port: web.Port, Protocol: web.Protocol}))
	if !ok || r.RevNATIndex != 7 {
		t.Fatalf("web's frontend %+v, want it with the reverse NAT index 7 the maps held", r)
	}
	ids := map[string]spec.BackendID{}
	for b := range lb.backends.All(txn) {
		ids[b.Address.String()] = b.ID
	}
	if ids["10.244.1.5"] != held.ID || ids["10.244.1.6"] == held.ID || len(ids) != 2 {
		t.Fatalf("backend ids %v, want 10.244.1.5 to keep the %d the maps held", ids, held.ID)
	}
}
