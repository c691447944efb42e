// Package endpointtest runs an endpoint manager for tests of the packages
// above it (the API, the agent, the tools), with its reconciler and a
// datapath in memory.
package endpointtest

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
)

// Datapath is endpoint.Datapath in memory: what is programmed, by id.
// Fail, while set, fails every upsert, and FailDeletes every delete.
type Datapath struct {
	mu          sync.Mutex
	live        map[uint16]spec.Endpoint
	upserts     int
	pruned      [][]uint16
	fail        error
	failDeletes error
}

var _ endpoint.Datapath = (*Datapath)(nil)

// NewDatapath holds nothing yet.
func NewDatapath() *Datapath { return &Datapath{live: map[uint16]spec.Endpoint{}} }

// UpsertEndpoint implements endpoint.Datapath.
func (d *Datapath) UpsertEndpoint(ep spec.Endpoint) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.upserts++
	if d.fail != nil {
		return d.fail
	}
	d.live[ep.ID] = ep
	return nil
}

// DeleteEndpoint implements endpoint.Datapath.
func (d *Datapath) DeleteEndpoint(ep spec.Endpoint) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failDeletes != nil {
		return d.failDeletes
	}
	delete(d.live, ep.ID)
	return nil
}

// PruneEndpoints implements endpoint.Datapath.
func (d *Datapath) PruneEndpoints(keep []spec.Endpoint) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := map[uint16]bool{}
	ids := []uint16{}
	for _, k := range keep {
		kept[k.ID] = true
		ids = append(ids, k.ID)
	}
	for id := range d.live {
		if !kept[id] {
			delete(d.live, id)
		}
	}
	d.pruned = append(d.pruned, ids)
	return nil
}

// Fail makes every upsert fail with err until Fail(nil).
func (d *Datapath) Fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail = err
}

// FailDeletes makes every delete fail with err until FailDeletes(nil).
func (d *Datapath) FailDeletes(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failDeletes = err
}

// Live is the programmed endpoint of id.
func (d *Datapath) Live(id uint16) (spec.Endpoint, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ep, ok := d.live[id]
	return ep, ok
}

// Endpoint is the programmed endpoint of id; zero when there is none.
func (d *Datapath) Endpoint(id uint16) spec.Endpoint {
	ep, _ := d.Live(id)
	return ep
}

// Put programs ep behind the manager's back, as an earlier agent left it.
func (d *Datapath) Put(ep spec.Endpoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.live[ep.ID] = ep
}

// All is every programmed endpoint, by id.
func (d *Datapath) All() []spec.Endpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.SortedFunc(maps.Values(d.live), func(a, b spec.Endpoint) int { return cmp.Compare(a.ID, b.ID) })
}

// Count is how many endpoints are programmed.
func (d *Datapath) Count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.live)
}

// Upserts counts the upserts asked for, failed ones included.
func (d *Datapath) Upserts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.upserts
}

// Pruned lists the ids kept by every prune so far.
func (d *Datapath) Pruned() [][]uint16 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]uint16(nil), d.pruned...)
}

// Start runs a manager over dp with its table and reconciler, stopped
// when the test ends. It does not restore: call Restore to.
func Start(t testing.TB, dp endpoint.Datapath, ids endpoint.IdentityAllocator, ipam endpoint.AddressReleaser, dir string) *endpoint.Manager {
	t.Helper()
	var m *endpoint.Manager
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell,
		cell.Module("endpoint-test", "Endpoint manager under test",
			cell.Provide(endpoint.NewTable, func(r job.Registry, h cell.Health) job.Group { return r.NewGroup(h) }),
			cell.Invoke(func(p reconciler.Params, tbl statedb.RWTable[*endpoint.EndpointRow]) error {
				m = endpoint.NewManager(hivetest.Logger(t), p.DB, tbl, ids, ipam, nil, dir)
				return endpoint.RegisterReconciler(p, m, dp)
			})))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatalf("start endpoint manager: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Errorf("stop endpoint manager: %v", err)
		}
	})
	return m
}
