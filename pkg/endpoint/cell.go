package endpoint

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"

	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/paths"
)

// Cell provides the *Manager and restores endpoints when the agent
// starts. It needs a Datapath and an IdentityAllocator from other cells.
var Cell = cell.Module("endpoint-manager", "Local endpoints created and programmed and persisted and restored",
	cell.Provide(newManagerCell, func(m *Manager) ipam.EndpointOwners { return m }),
	cell.Invoke(registerMetrics),
)

// StateDir is where endpoints persist under the state directory.
func StateDir(p paths.Config) string { return filepath.Join(p.StateDir, "endpoints") }

type managerParams struct {
	cell.In
	Log       *slog.Logger
	Lifecycle cell.Lifecycle
	Jobs      job.Registry
	Health    cell.Health
	Paths     paths.Config
	Datapath  Datapath
	IDs       IdentityAllocator
	IPAM      *ipam.Allocator
}

func newManagerCell(p managerParams) *Manager {
	m := NewManager(p.Log, p.Datapath, p.IDs, p.IPAM, StateDir(p.Paths))
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(hc cell.HookContext) error {
			// A failed restore is reported, not fatal: the endpoints that
			// did restore keep their pods working, and the others are
			// retried in the background.
			if err := m.Restore(context.Context(hc)); err != nil {
				p.Log.Warn("endpoint restore incomplete", "error", err)
				p.Health.Degraded("restore incomplete", err)
			}
			return nil
		},
	})
	// Added after the hook above, so it starts after the restore.
	g := p.Jobs.NewGroup(p.Health, job.WithLogger(p.Log))
	g.Add(job.OneShot("finish-restore", func(ctx context.Context, _ cell.Health) error {
		finishRestore(ctx, m, p.Health, p.Log, defaultRetry)
		return nil
	}))
	return m
}
