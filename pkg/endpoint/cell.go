package endpoint

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/cilium/hive/cell"

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
	Health    cell.Health
	Paths     paths.Config
	Datapath  Datapath
	IDs       IdentityAllocator
	IPAM      *ipam.Allocator
}

func newManagerCell(p managerParams) *Manager {
	m := NewManager(p.Log, p.Datapath, p.IDs, p.IPAM, StateDir(p.Paths))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(hc cell.HookContext) error {
			// A failed restore is reported, not fatal: the endpoints that
			// did restore keep their pods working, and the others are
			// retried in the background.
			if err := m.Restore(context.Context(hc)); err != nil {
				p.Log.Warn("endpoint restore incomplete", "error", err)
				p.Health.Degraded("restore incomplete", err)
			}
			go func() {
				defer close(done)
				finishRestore(ctx, m, p.Health, p.Log, defaultRetry)
			}()
			return nil
		},
		OnStop: func(cell.HookContext) error { cancel(); <-done; return nil },
	})
	return m
}
