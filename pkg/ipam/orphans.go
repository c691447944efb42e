package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
)

// EndpointOwners tells whether a container has an endpoint; the endpoint
// manager provides it.
type EndpointOwners interface {
	HasEndpoint(containerID string) bool
}

// Orphans are the allocations whose owner has no endpoint: after a
// restore, what an agent crash between allocation and endpoint left.
func (a *Allocator) Orphans(owners EndpointOwners) []Allocation {
	var out []Allocation
	for _, al := range a.List() {
		if !owners.HasEndpoint(al.Owner) {
			out = append(out, al)
		}
	}
	return out
}

// ReleaseOrphans frees the orphans that are orphans still: their address
// is still their owner's, the owner has not asked for it since (a retried
// CNI ADD does), and has no endpoint. It returns what it freed.
func (a *Allocator) ReleaseOrphans(orphans []Allocation, since time.Time, owners EndpointOwners) ([]Allocation, error) {
	var freed []Allocation
	var errs []error
	for _, o := range orphans {
		// Asked before the lock: the endpoint manager calls into the
		// allocator under its own lock.
		if owners.HasEndpoint(o.Owner) {
			continue
		}
		a.mu.Lock()
		held := a.owner[o.IP] == o.Owner
		asked, ok := a.asked[o.Owner]
		a.mu.Unlock()
		if !held || (ok && !asked.Before(since)) {
			continue
		}
		if err := a.Release(o.IP); err != nil && !errors.Is(err, ErrNotAllocated) {
			errs = append(errs, err)
			continue
		}
		freed = append(freed, o)
	}
	return freed, errors.Join(errs...)
}

type orphanParams struct {
	cell.In
	Config    Config
	Jobs      job.Registry
	Health    cell.Health
	Log       *slog.Logger
	Allocator *Allocator
	Owners    EndpointOwners `optional:"true"`
}

// registerOrphanRelease frees, a grace period after the endpoints are
// restored, the addresses that no endpoint holds. Its job starts after the
// endpoint manager's restore, which it depends on. The grace period lets
// a CNI ADD that the crash interrupted finish or be retried; it should
// exceed the plugin's timeout.
func registerOrphanRelease(p orphanParams) {
	if p.Owners == nil {
		return
	}
	g := p.Jobs.NewGroup(p.Health, job.WithLogger(p.Log))
	g.Add(job.OneShot("release-orphans", func(ctx context.Context, _ cell.Health) error {
		since := p.Allocator.now()
		orphans := p.Allocator.Orphans(p.Owners)
		if len(orphans) == 0 {
			return nil
		}
		for _, o := range orphans {
			p.Log.Info("address without an endpoint after restore; released unless claimed",
				"ip", o.IP, "owner", o.Owner, "in", p.Config.IPAMOrphanGracePeriod)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.Config.IPAMOrphanGracePeriod):
		}
		freed, err := p.Allocator.ReleaseOrphans(orphans, since, p.Owners)
		for _, o := range freed {
			p.Log.Info("released an address no endpoint claimed", "ip", o.IP, "owner", o.Owner)
		}
		if err != nil {
			p.Log.Warn("release orphaned addresses", "error", err)
		}
		return nil
	}))
}

func validGrace(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--ipam-orphan-grace-period %s: must not be negative", d)
	}
	return nil
}
