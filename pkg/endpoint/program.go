package endpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/statedb/reconciler"
)

// programTimeout bounds how long a caller waits for the reconciler; the
// reconciler goes on retrying after that.
const programTimeout = time.Minute

// want writes e's row, pending for the reconciler.
func (m *Manager) want(e *Endpoint) error {
	txn := m.db.WriteTxn(m.tbl)
	defer txn.Abort()
	row := &Desired{Endpoint: *e, EnforcePolicy: m.policy != nil && m.policy.Enforced(), Status: reconciler.StatusPending()}
	if _, _, err := m.tbl.Insert(txn, row); err != nil {
		return fmt.Errorf("endpoint %d: %w", e.ID, err)
	}
	txn.Commit()
	return nil
}

// program writes e's row and waits until the reconciler programmed it
// and the policy engine put its policy for e's identity in place.
func (m *Manager) program(ctx context.Context, e *Endpoint) error {
	if err := m.want(e); err != nil {
		return err
	}
	if err := m.awaitProgrammed(ctx, e.ID); err != nil {
		return err
	}
	if m.policy == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, programTimeout)
	defer cancel()
	if err := m.policy.AwaitPolicy(ctx, e.ID, e.Identity); err != nil {
		return fmt.Errorf("endpoint %d policy: %w", e.ID, err)
	}
	return nil
}

// awaitProgrammed waits for the reconciler's verdict on id's row: nil
// once programmed, its error once an attempt failed.
func (m *Manager) awaitProgrammed(ctx context.Context, id uint16) error {
	ctx, cancel := context.WithTimeout(ctx, programTimeout)
	defer cancel()
	for {
		d, _, watch, ok := m.tbl.GetWatch(m.db.ReadTxn(), IDIndex.Query(id))
		if !ok {
			return fmt.Errorf("endpoint %d: removed while being programmed", id)
		}
		switch d.Status.Kind {
		case reconciler.StatusKindDone:
			return nil
		case reconciler.StatusKindError:
			return errors.New(d.Status.GetError())
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return fmt.Errorf("endpoint %d: not programmed yet: %w", id, context.Cause(ctx))
		}
	}
}

// unwant deletes id's row; the reconciler unprograms it, and the id stays
// taken until it has.
func (m *Manager) unwant(id uint16) error {
	m.drainMu.Lock()
	if m.draining[id] == nil {
		m.draining[id] = &drain{done: make(chan struct{})}
	}
	m.drainMu.Unlock()
	txn := m.db.WriteTxn(m.tbl)
	defer txn.Abort()
	if _, _, err := m.tbl.Delete(txn, &Desired{Endpoint: Endpoint{ID: id}}); err != nil {
		return fmt.Errorf("endpoint %d: %w", id, err)
	}
	txn.Commit()
	return nil
}

// awaitUnprogrammed waits until the reconciler removed id's programs.
func (m *Manager) awaitUnprogrammed(ctx context.Context, id uint16) error {
	m.drainMu.Lock()
	d := m.draining[id]
	m.drainMu.Unlock()
	if d == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, programTimeout)
	defer cancel()
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		m.drainMu.Lock()
		defer m.drainMu.Unlock()
		return fmt.Errorf("unprogram endpoint %d: %w", id, errors.Join(context.Cause(ctx), d.err))
	}
}

// unprogrammed is the reconciler's word that id's programs are gone.
func (m *Manager) unprogrammed(id uint16) {
	m.drainMu.Lock()
	defer m.drainMu.Unlock()
	if d := m.draining[id]; d != nil {
		close(d.done)
		delete(m.draining, id)
	}
}

// prunedExcept is the reconciler's word that only kept ids have programs.
func (m *Manager) prunedExcept(kept map[uint16]bool) {
	m.drainMu.Lock()
	var gone []uint16
	for id := range m.draining {
		if !kept[id] {
			gone = append(gone, id)
		}
	}
	m.drainMu.Unlock()
	for _, id := range gone {
		m.unprogrammed(id)
	}
}

// unprogramFailed keeps the reconciler's last error for a waiting Delete.
func (m *Manager) unprogramFailed(id uint16, err error) {
	m.drainMu.Lock()
	defer m.drainMu.Unlock()
	if d := m.draining[id]; d != nil {
		d.err = err
	}
}
