package ipam

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/paths"
)

// cidrSource hands out its CIDR once released.
type cidrSource struct {
	ready chan struct{}
	cidr  netip.Prefix
}

func (s *cidrSource) WaitPodCIDR(ctx context.Context) (netip.Prefix, error) {
	select {
	case <-s.ready:
		return s.cidr, nil
	case <-ctx.Done():
		return netip.Prefix{}, ctx.Err()
	}
}

func newTestHive(t *testing.T, cfg Config, src PodCIDRSource, a **Allocator) *hive.Hive {
	t.Helper()
	cells := []cell.Cell{
		health.Cell,
		cell.Provide(func() paths.Config { return paths.Config{StateDir: t.TempDir()} }),
		cell.Module("ipam-test", "ipam under test",
			cell.Provide(func() Config { return cfg }, newFromConfig),
			cell.Invoke(func(x *Allocator) { *a = x }),
		),
	}
	if src != nil {
		cells = append(cells, cell.Provide(func() PodCIDRSource { return src }))
	}
	return health.NewHive(cells...)
}

func TestCellWaitsForTheClusterPodCIDR(t *testing.T) {
	src := &cidrSource{ready: make(chan struct{}), cidr: netip.MustParsePrefix("10.9.0.0/24")}
	var a *Allocator
	h := newTestHive(t, Config{}, src, &a)
	started := make(chan error, 1)
	go func() { started <- h.Start(slog.Default(), context.Background()) }()
	select {
	case err := <-started:
		t.Fatalf("started before the pod CIDR was known: %v", err)
	default:
	}
	close(src.ready)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(slog.Default(), context.Background()) })
	if r, err := a.Allocate("c1"); err != nil || !src.cidr.Contains(r.IP) {
		t.Fatalf("Allocate: %v %v, want an address in %s", r, err, src.cidr)
	}
}

func TestCellFlagWinsOverTheCluster(t *testing.T) {
	src := &cidrSource{ready: make(chan struct{})} // never ready
	var a *Allocator
	h := newTestHive(t, Config{IPAMPodCIDR: "10.8.0.0/24"}, src, &a)
	if err := h.Start(slog.Default(), context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(slog.Default(), context.Background()) })
	if a.PodCIDR() != netip.MustParsePrefix("10.8.0.0/24") {
		t.Fatalf("pod CIDR %v", a.PodCIDR())
	}
}

func TestCellWithoutCIDRNorClusterNamesTheFlag(t *testing.T) {
	var a *Allocator
	h := newTestHive(t, Config{}, nil, &a)
	err := h.Start(slog.Default(), context.Background())
	if err == nil || !strings.Contains(err.Error(), "--ipam-pod-cidr") {
		t.Fatalf("start: %v, want an error naming --ipam-pod-cidr", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Fatal("error is a cancellation, not the missing flag")
	}
}
