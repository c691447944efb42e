package endpoint

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/paths"
)

// Cell provides the *Manager and the endpoints table (statedb.Table[*EndpointRow]
// for readers), reconciles the table into the Datapath, and restores
// endpoints when the agent starts. It needs a Datapath and an
// IdentityAllocator from other cells.
var Cell = cell.Module("endpoint-manager", "Local endpoints created and programmed and persisted and restored",
	cell.ProvidePrivate(NewTable),
	health.JobGroup,
	cell.Provide(newManagerCell, func(m *Manager) ipam.EndpointOwners { return m },
		// From the table, not the manager: the policy engine reads the
		// table and the manager waits on the policy engine.
		func(t statedb.RWTable[*EndpointRow]) statedb.Table[*EndpointRow] { return t }),
	cell.Invoke(registerMetrics),
)

// StateDir is where endpoints persist under the state directory.
func StateDir(p paths.Config) string { return filepath.Join(p.StateDir, "endpoints") }

type managerParams struct {
	cell.In
	Log        *slog.Logger
	Lifecycle  cell.Lifecycle
	Jobs       job.Group
	Health     cell.Health
	Paths      paths.Config
	Datapath   Datapath
	IDs        IdentityAllocator
	Policy     PolicyGate `optional:"true"`
	IPAM       *ipam.Allocator
	Table      statedb.RWTable[*EndpointRow]
	Reconciler reconciler.Params
}

func newManagerCell(p managerParams) (*Manager, error) {
	m := NewManager(p.Log, p.Reconciler.DB, p.Table, p.IDs, p.IPAM, p.Policy, StateDir(p.Paths))
	// The reconciler starts before the restore hook below, so that
	// Restore can wait for it.
	if err := RegisterReconciler(p.Reconciler, m, p.Datapath); err != nil {
		return nil, err
	}
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
	p.Jobs.Add(job.OneShot("finish-restore", func(ctx context.Context, _ cell.Health) error {
		m.FinishRestore(ctx, p.Health, DefaultRetry)
		return nil
	}))
	return m, nil
}
