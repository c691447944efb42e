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
	cell.Provide(newManagerCell),
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
	p.Lifecycle.Append(cell.Hook{OnStart: func(ctx cell.HookContext) error {
		// A failed restore is reported, not fatal: the endpoints that
		// did restore keep their pods working.
		if err := m.Restore(context.Context(ctx)); err != nil {
			p.Log.Warn("endpoint restore incomplete", "error", err)
			p.Health.Degraded("restore incomplete", err)
			return nil
		}
		p.Health.OK("endpoints restored")
		return nil
	}})
	return m
}
