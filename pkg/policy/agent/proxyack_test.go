package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/policytest"
)

// gateTest is the policy map's operations against a map in memory, with
// the proxy's acknowledgements written by hand: the proxy of the test.
type gateTest struct {
	t       *testing.T
	db      *statedb.DB
	entries statedb.RWTable[*PolicyEntryRow]
	acks    statedb.RWTable[*ProxyAckRow]
	m       *policytest.Map
	o       *ops
	warns   *atomic.Int32
}

func newGateTest(t *testing.T, timeout time.Duration) *gateTest {
	db := statedb.New()
	entries, err := NewEntriesTable(db)
	if err != nil {
		t.Fatal(err)
	}
	acks, err := NewProxyAcksTable(db)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateTest{t: t, db: db, entries: entries, acks: acks, m: policytest.New(), warns: &atomic.Int32{}}
	log := slog.New(warnCounter{g.warns})
	g.o = newOps(entries, func() Map { return g.m }, policy.NewCookies(), &proxyGate{db: db, acks: acks, log: log, timeout: timeout})
	return g
}

// warnCounter counts the warnings logged.
type warnCounter struct{ n *atomic.Int32 }

func (warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		w.n.Add(1)
	}
	return nil
}
func (w warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnCounter) WithGroup(string) slog.Handler      { return w }

// insert writes rows into the entries table and returns them as a batch.
func (g *gateTest) insert(rows ...*PolicyEntryRow) []reconciler.BatchEntry[*PolicyEntryRow] {
	txn := g.db.WriteTxn(g.entries)
	var batch []reconciler.BatchEntry[*PolicyEntryRow]
	for _, r := range rows {
		r.Status = reconciler.StatusPending()
		if _, _, err := g.entries.Insert(txn, r); err != nil {
			g.t.Fatal(err)
		}
		batch = append(batch, reconciler.BatchEntry[*PolicyEntryRow]{Object: r})
	}
	txn.Commit()
	return batch
}

// ack is the proxy acknowledging revision rev.
func (g *gateTest) ack(rev uint64) {
	txn := g.db.WriteTxn(g.acks)
	if _, _, err := g.acks.Insert(txn, &ProxyAckRow{Revision: rev}); err != nil {
		g.t.Fatal(err)
	}
	txn.Commit()
}

// update runs UpdateBatch on its own goroutine; the channel receives the
// batch's errors when it returns.
func (g *gateTest) update(batch []reconciler.BatchEntry[*PolicyEntryRow]) <-chan error {
	done := make(chan error, 1)
	txn := g.db.ReadTxn()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		g.o.UpdateBatch(ctx, txn, batch)
		var err error
		for _, b := range batch {
			if b.Result != nil {
				err = b.Result
			}
		}
		done <- err
	}()
	return done
}

// holds fails unless endpoint ep's map holds exactly want.
func (g *gateTest) holds(ep uint16, want ...spec.PolicyEntry) error {
	if got := g.m.Policy(ep); !slices.Equal(got, want) {
		return fmt.Errorf("endpoint %d: map holds %v, want %v", ep, got, want)
	}
	return nil
}

func waiting(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: the update returned (%v), want it to wait for the proxy", what, err)
	case <-time.After(100 * time.Millisecond):
	}
}

func returned(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the update still waits for the proxy")
	}
}

var (
	redirected = spec.PolicyEntry{Direction: spec.Egress, Identity: 300, Protocol: 6, Port: 80, ProxyPort: 10002}
	plain      = spec.PolicyEntry{Direction: spec.Egress, Identity: 300, Protocol: 6, Port: 443}
	dns        = spec.PolicyEntry{Direction: spec.Egress, Identity: 301, Protocol: 17, Port: 53, ProxyPort: 10001}
)

// An endpoint's redirect to the proxy goes into its map only once the
// proxy acknowledged the revision that brought it; an endpoint without
// one in the same batch does not wait.
func TestRedirectsWaitForTheProxy(t *testing.T) {
	g := newGateTest(t, time.Hour)
	g.ack(4) // the proxy knows an older policy
	done := g.update(g.insert(
		&PolicyEntryRow{EndpointID: 3, Entry: redirected, Revision: 5},
		&PolicyEntryRow{EndpointID: 3, Entry: plain, Revision: 5},
		&PolicyEntryRow{EndpointID: 4, Entry: plain, Revision: 5},
	))
	testenv.Eventually(t, 10*time.Second, func() error { return g.holds(4, plain) })
	waiting(t, done, "acknowledged 4 of 5")
	if err := g.holds(3); err != nil {
		t.Fatalf("before the proxy's acknowledgement: %v", err)
	}
	g.ack(4) // the same again (a restarted proxy)
	waiting(t, done, "acknowledged 4 again")
	if err := g.holds(3); err != nil {
		t.Fatalf("before the proxy's acknowledgement: %v", err)
	}
	g.ack(5)
	returned(t, done)
	if err := g.holds(3, plain, redirected); err != nil {
		t.Fatal(err)
	}

	// A batch that redirects nothing new never waits, whatever the proxy
	// acknowledged: removing a redirect neither.
	done = g.update(g.insert(
		&PolicyEntryRow{EndpointID: 3, Entry: redirected, Revision: 9, Deleted: true},
		&PolicyEntryRow{EndpointID: 5, Entry: plain, Revision: 9},
	))
	returned(t, done)
	if err := g.holds(3, plain); err != nil {
		t.Fatal(err)
	}

	// A row retried alone waits as its batch did, and so does a prune
	// that writes a redirect the proxy does not know (the reconciler
	// runs one operation at a time).
	g.insert(&PolicyEntryRow{EndpointID: 6, Entry: dns, Revision: 10})
	retried := make(chan error, 1)
	go func() {
		row, _, _ := g.entries.Get(g.db.ReadTxn(), EntryIndex.Query(entryID{6, dns}))
		retried <- g.o.Update(context.Background(), g.db.ReadTxn(), 0, row)
	}()
	waiting(t, retried, "retry of revision 10, acknowledged 5")
	if err := g.holds(6); err != nil {
		t.Fatal(err)
	}
	g.ack(10)
	returned(t, retried)
	if err := g.holds(6, dns); err != nil {
		t.Fatal(err)
	}
	g.insert(&PolicyEntryRow{EndpointID: 7, Entry: dns, Revision: 11})
	pruned := make(chan error, 1)
	go func() {
		txn := g.db.ReadTxn()
		pruned <- g.o.Prune(context.Background(), txn, g.entries.All(txn))
	}()
	waiting(t, pruned, "prune with revision 11, acknowledged 10")
	if err := g.holds(7); err != nil {
		t.Fatal(err)
	}
	g.ack(11)
	returned(t, pruned)
	if err := g.holds(7, dns); err != nil {
		t.Fatal(err)
	}
	if n := g.warns.Load(); n != 0 {
		t.Errorf("%d warnings, want none: the proxy acknowledged in time", n)
	}
}

// A proxy that does not acknowledge in time (none runs) holds a redirect
// back for the timeout, once: then redirects go in without waiting, and
// one warning says so, until the proxy acknowledges again.
func TestRedirectsAfterTheTimeout(t *testing.T) {
	g := newGateTest(t, 50*time.Millisecond)
	returned(t, g.update(g.insert(&PolicyEntryRow{EndpointID: 3, Entry: redirected, Revision: 5})))
	if err := g.holds(3, redirected); err != nil {
		t.Fatal(err)
	}
	if n := g.warns.Load(); n != 1 {
		t.Fatalf("%d warnings after the timeout, want 1", n)
	}

	// Late, the proxy is not waited for: were it, this hour would fail
	// the test.
	g.o.gate.timeout = time.Hour
	returned(t, g.update(g.insert(&PolicyEntryRow{EndpointID: 4, Entry: redirected, Revision: 6})))
	if err := g.holds(4, redirected); err != nil {
		t.Fatal(err)
	}
	if n := g.warns.Load(); n != 1 {
		t.Fatalf("%d warnings, want still 1", n)
	}

	// The proxy is back with an older policy: redirects wait again.
	g.ack(6)
	done := g.update(g.insert(&PolicyEntryRow{EndpointID: 5, Entry: dns, Revision: 7}))
	waiting(t, done, "acknowledged 6 of 7")
	if err := g.holds(5); err != nil {
		t.Fatal(err)
	}
	g.ack(7)
	returned(t, done)
	if err := g.holds(5, dns); err != nil {
		t.Fatal(err)
	}
}

// A wait ends with the reconciler: the rows fail, the map is not written.
func TestRedirectWaitEndsWithTheReconciler(t *testing.T) {
	g := newGateTest(t, time.Hour)
	batch := g.insert(&PolicyEntryRow{EndpointID: 3, Entry: redirected, Revision: 5})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		g.o.UpdateBatch(ctx, g.db.ReadTxn(), batch)
		close(done)
	}()
	cancel()
	<-done
	if batch[0].Result == nil {
		t.Fatal("the batch succeeded without the proxy's acknowledgement")
	}
	if err := g.holds(3); err != nil {
		t.Fatal(err)
	}
}

// --proxy-ack-timeout 0 turns the wait off.
func TestRedirectsWithoutWaiting(t *testing.T) {
	g := newGateTest(t, 0)
	returned(t, g.update(g.insert(&PolicyEntryRow{EndpointID: 3, Entry: redirected, Revision: 5})))
	if err := g.holds(3, redirected); err != nil {
		t.Fatal(err)
	}
	if n := g.warns.Load(); n != 0 {
		t.Errorf("%d warnings, want none", n)
	}
}

func TestMapConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tweak   func(*MapConfig)
		wantErr string
	}{
		{"default", func(*MapConfig) {}, ""},
		{"no wait", func(c *MapConfig) { c.ProxyAckTimeout = 0 }, ""},
		{"negative wait", func(c *MapConfig) { c.ProxyAckTimeout = -time.Second }, "--proxy-ack-timeout"},
		{"small map", func(c *MapConfig) { c.BPFPolicyMapMax = 10 }, "--bpf-policy-map-max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultMapConfig
			tc.tweak(&c)
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}
