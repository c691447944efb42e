package endpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/pkg/desired"
)

// programTimeout bounds how long a caller waits for the reconciler; the
// reconciler goes on retrying after that.
const programTimeout = time.Minute

// want writes e's row, pending for the reconciler.
func (m *Manager) want(e *Endpoint) error {
	txn := m.db.WriteTxn(m.tbl)
	defer txn.Abort()
	row := &EndpointRow{Endpoint: *e, EnforcePolicy: m.policy != nil && m.policy.Enforced(), Status: reconciler.StatusPending()}
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
	if err := desired.Await(ctx, m.db, m.tbl, IDIndex.Query(id), 0); err != nil {
		return fmt.Errorf("endpoint %d: %w", id, err)
	}
	return nil
}

// unwant turns id's row into a tombstone: the reconciler unprograms it,
// and the id stays taken until it has (the row goes then).
func (m *Manager) unwant(id uint16) error {
	txn := m.db.WriteTxn(m.tbl)
	defer txn.Abort()
	cur, _, ok := m.tbl.Get(txn, IDIndex.Query(id))
	if !ok || cur.Deleted {
		return nil
	}
	row := cur.Clone()
	row.Deleted, row.Status = true, reconciler.StatusPending()
	if _, _, err := m.tbl.Insert(txn, row); err != nil {
		return fmt.Errorf("endpoint %d: %w", id, err)
	}
	txn.Commit()
	return nil
}

// awaitUnprogrammed waits until the reconciler removed id's programs;
// a failed attempt returns its error (the reconciler goes on retrying,
// and the id stays taken until it succeeds).
func (m *Manager) awaitUnprogrammed(ctx context.Context, id uint16) error {
	ctx, cancel := context.WithTimeout(ctx, programTimeout)
	defer cancel()
	if err := desired.Await(ctx, m.db, m.tbl, IDIndex.Query(id), 0); err != nil {
		return fmt.Errorf("unprogram endpoint %d: %w", id, err)
	}
	return nil
}
