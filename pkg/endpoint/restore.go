package endpoint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cilium/hive/cell"
)

// restoreLocked gives a loaded endpoint its identity again and writes its
// row. When the identity cannot be had (the API server is away), the
// endpoint keeps the one it had, and its datapath is programmed with it.
func (m *Manager) restoreLocked(ctx context.Context, e *Endpoint) error {
	var errs []error
	if id, err := m.allocateIdentity(ctx, e); err == nil {
		e.Identity = id
	} else {
		errs = append(errs, fmt.Errorf("endpoint %d identity: %w", e.ID, err))
	}
	if err := m.want(e); err != nil {
		errs = append(errs, fmt.Errorf("restore endpoint %d: %w", e.ID, err))
	}
	if err := m.persist(e); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RetryRestore tries again the endpoints whose identity failed to
// restore, or whose datapath the reconciler has not programmed yet, and
// returns what still fails; nil once every restored endpoint is whole.
// Endpoints deleted meanwhile are forgotten.
func (m *Manager) RetryRestore(ctx context.Context) error {
	var errs []error
	var retried []uint16
	m.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(m.unrestored)) {
		e, ok := m.byID[id]
		if !ok {
			delete(m.unrestored, id)
			continue
		}
		if err := m.restoreLocked(ctx, e); err != nil {
			errs = append(errs, err)
			continue
		}
		retried = append(retried, id)
	}
	m.mu.Unlock()
	// The reconciler retries by itself; wait for its verdict without
	// holding up Create and Delete.
	for _, id := range retried {
		if err := m.awaitProgrammed(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("restore endpoint %d: %w", id, err))
			continue
		}
		m.mu.Lock()
		delete(m.unrestored, id)
		m.mu.Unlock()
		m.log.Info("endpoint restored on retry", "id", id)
	}
	return errors.Join(errs...)
}

// Unrestored counts the endpoints that RetryRestore still has to do.
func (m *Manager) Unrestored() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.unrestored)
}

// RestoreSkipped is what the last Restore could not load (state files
// that do not read or parse), which no retry mends.
func (m *Manager) RestoreSkipped() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.skipped
}

// RetryPolicy paces RetryRestore: backoff from Min to Max, until GiveUp.
type RetryPolicy struct {
	Min, Max, GiveUp time.Duration
}

// DefaultRetry retries long enough for an API server to come back.
var DefaultRetry = RetryPolicy{Min: time.Second, Max: time.Minute, GiveUp: 10 * time.Minute}

// FinishRestore reports the restore as done on h, or retries the
// endpoints whose identity failed until they are whole or the policy
// gives up. Either way "restore incomplete" does not stay: it clears, or
// gives way to the reason the restore gave up. The cell runs it as a job.
func (m *Manager) FinishRestore(ctx context.Context, h cell.Health, p RetryPolicy) {
	report := func() {
		if err := m.RestoreSkipped(); err != nil {
			h.OK("endpoints restored; skipped what does not load: " + err.Error())
			return
		}
		h.OK("endpoints restored")
	}
	if m.Unrestored() == 0 {
		report()
		return
	}
	deadline := time.Now().Add(p.GiveUp)
	wait := p.Min
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := m.RetryRestore(ctx)
		if err == nil {
			m.log.Info("endpoint restore complete")
			report()
			return
		}
		if !time.Now().Before(deadline) {
			m.log.Error("endpoint restore gave up", "after", p.GiveUp, "error", err)
			h.Stopped(fmt.Sprintf("restore gave up after %s: %v", p.GiveUp, err))
			return
		}
		h.Degraded("restore incomplete, retrying", err)
		wait = min(2*wait, p.Max)
	}
}
