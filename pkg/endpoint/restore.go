package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/cilium/hive/cell"
)

// restoreLocked gives a loaded endpoint its identity again and programs
// it. When the identity cannot be had (the API server is away), the
// endpoint keeps the one it had, and its datapath is programmed with it.
func (m *Manager) restoreLocked(ctx context.Context, e *Endpoint) error {
	var errs []error
	if id, err := m.ids.Allocate(ctx, e.pod()); err == nil {
		e.Identity = id
	} else {
		errs = append(errs, fmt.Errorf("endpoint %d identity: %w", e.ID, err))
	}
	if err := m.dp.UpsertEndpoint(e.datapathEndpoint()); err != nil {
		errs = append(errs, fmt.Errorf("restore endpoint %d: %w", e.ID, err))
	}
	if err := m.persist(e); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RetryRestore tries again the endpoints whose identity or datapath failed
// to restore, and returns what still fails; nil once every restored
// endpoint is whole. Endpoints deleted meanwhile are forgotten.
func (m *Manager) RetryRestore(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
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
		delete(m.unrestored, id)
		m.log.Info("endpoint restored on retry", "id", id, "container", e.ContainerID, "identity", e.Identity)
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

// retryPolicy paces RetryRestore: backoff from Min to Max, until GiveUp.
type retryPolicy struct {
	Min, Max, GiveUp time.Duration
}

// defaultRetry retries long enough for an API server to come back.
var defaultRetry = retryPolicy{Min: time.Second, Max: time.Minute, GiveUp: 10 * time.Minute}

// finishRestore reports the restore as done, or retries the endpoints
// that failed until they are whole or the policy gives up. Either way
// "restore incomplete" does not stay: it clears, or gives way to the
// reason the restore gave up.
func finishRestore(ctx context.Context, m *Manager, h cell.Health, log *slog.Logger, p retryPolicy) {
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
			log.Info("endpoint restore complete")
			report()
			return
		}
		if !time.Now().Before(deadline) {
			log.Error("endpoint restore gave up", "after", p.GiveUp, "error", err)
			h.Stopped(fmt.Sprintf("restore gave up after %s: %v", p.GiveUp, err))
			return
		}
		h.Degraded("restore incomplete, retrying", err)
		wait = min(2*wait, p.Max)
	}
}
