package node_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/node"
	"github.com/cilium-go/cilium/pkg/node/nodetest"
)

// equal compares routes with want.
func equal(r *nodetest.Routes, want map[netip.Prefix]netip.Addr) error {
	if got := r.Routes(); !maps.Equal(got, want) {
		return fmt.Errorf("routes %v, want %v", got, want)
	}
	return nil
}

// TestReconcilerFollowsTheTable: a route left by an earlier agent goes
// once the writer's first Replace initialized the table, and never before;
// routes follow every Replace.
func TestReconcilerFollowsTheTable(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	stale := pfx("10.0.9.0/24")
	routes := nodetest.New(map[netip.Prefix]netip.Addr{stale: addr("192.168.0.9")})
	var w *node.Writer
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell, node.TableCell,
		cell.Module("node-test", "Remote node reconciler under test",
			cell.ProvidePrivate(func(r job.Registry, h cell.Health) job.Group { return r.NewGroup(h) }),
			cell.Invoke(func(p reconciler.Params, tbl statedb.RWTable[*node.RouteRow]) error {
				w = node.NewWriter(p.DB, tbl)
				return node.RegisterReconciler(p, tbl, routes)
			})))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })

	// Before the first Replace, nothing is pruned.
	if err := equal(routes, map[netip.Prefix]netip.Addr{stale: addr("192.168.0.9")}); err != nil {
		t.Fatalf("before the table is initialized: %v", err)
	}
	b := spec.RemoteNode{IPv4: addr("192.168.0.3"), PodCIDR: pfx("10.0.2.0/24")}
	c := spec.RemoteNode{IPv4: addr("192.168.0.4"), PodCIDR: pfx("10.0.3.0/24")}
	if err := w.Replace([]spec.RemoteNode{b, c}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		return equal(routes, map[netip.Prefix]netip.Addr{b.PodCIDR: b.IPv4, c.PodCIDR: c.IPv4})
	})
	b.IPv4 = addr("192.168.0.5") // node b moved
	if err := w.Replace([]spec.RemoteNode{b}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		return equal(routes, map[netip.Prefix]netip.Addr{b.PodCIDR: b.IPv4})
	})
}
