package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// ProxyAcksTableName is the proxy acknowledgements' table in statedb.
const ProxyAcksTableName = "proxy-acks"

// ProxyAckRow is the layer-7 proxy's acknowledgement of the policy it
// judges by, which the agent hands it in a file (pkg/proxy/agent): the
// proxy has loaded the one written as of Revision, an engine revision
// (EndpointPolicyRow.Revision) of this agent's run. The table holds one
// row at most, which each acknowledgement replaces, even one of the same
// revision (a restarted proxy's).
type ProxyAckRow struct {
	Revision uint64
}

// TableHeader implements statedb.TableWritable.
func (*ProxyAckRow) TableHeader() []string { return []string{"Revision"} }

// TableRow implements statedb.TableWritable.
func (a *ProxyAckRow) TableRow() []string { return []string{strconv.FormatUint(a.Revision, 10)} }

var proxyAckKey = index.Key("l7-proxy")

// ProxyAckIndex is the acknowledgements' primary index, of one key: the
// node has one proxy.
var ProxyAckIndex = statedb.Index[*ProxyAckRow, struct{}]{
	Name:       "proxy",
	FromObject: func(*ProxyAckRow) index.KeySet { return index.NewKeySet(proxyAckKey) },
	FromKey:    func(struct{}) index.Key { return proxyAckKey },
	Unique:     true,
}

// NewProxyAcksTable creates the proxy acknowledgements' table.
func NewProxyAcksTable(db *statedb.DB) (statedb.RWTable[*ProxyAckRow], error) {
	return statedb.NewTable(db, ProxyAcksTableName, ProxyAckIndex)
}

// proxyGate holds an endpoint's redirects to the layer-7 proxy back
// until the proxy has acknowledged a policy that knows them: a
// connection redirected sooner would meet the proxy's older policy,
// which denies it. Once a wait times out, the proxy is taken for absent
// and nothing waits until it acknowledges again, so that a node without
// a proxy loses one timeout, not one per change. The timeout
// (MapConfig.ProxyAckTimeout) is short: a proxy that takes longer is not
// running (its redirects would drop anyway) or cannot load the policy
// (it judges by its old one either way).
type proxyGate struct {
	db      *statedb.DB
	acks    statedb.Table[*ProxyAckRow]
	log     *slog.Logger
	timeout time.Duration

	// late is set when a wait timed out; lateAck is the acknowledgement
	// that was the latest then (its statedb revision, 0: none). Only the
	// reconciler's goroutine uses them.
	late    bool
	lateAck statedb.Revision
}

// await returns once the proxy has acknowledged revision rev or later
// (0: there is nothing to wait for), or the timeout passed; it fails
// only when ctx ends first.
func (g *proxyGate) await(ctx context.Context, rev uint64) error {
	if rev == 0 || g == nil || g.acks == nil || g.timeout == 0 {
		return nil
	}
	var timeout <-chan time.Time
	for {
		acked, ackRev, watch := g.latest()
		if g.late && ackRev != g.lateAck {
			g.late = false
			g.log.Info("layer-7 proxy acknowledges its policy again", "revision", acked)
		}
		switch {
		case acked >= rev:
			return nil
		case g.late:
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(g.timeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-watch:
		case <-timeout:
			g.late, g.lateAck = true, ackRev
			g.log.Warn("layer-7 proxy has not acknowledged the policy of new redirects in time; redirecting without waiting until it does",
				"revision", rev, "acknowledged", acked, "timeout", g.timeout)
			return nil
		case <-ctx.Done():
			return fmt.Errorf("wait for the layer-7 proxy's policy %d: %w", rev, context.Cause(ctx))
		}
	}
}

// latest is the revision the proxy acknowledged last, the statedb
// revision of that acknowledgement (0: none yet), and a channel that
// closes at the next one.
func (g *proxyGate) latest() (acked uint64, ackRev statedb.Revision, watch <-chan struct{}) {
	row, rev, watch, ok := g.acks.GetWatch(g.db.ReadTxn(), ProxyAckIndex.Query(struct{}{}))
	if !ok {
		return 0, 0, watch
	}
	return row.Revision, rev, watch
}

// redirect is the revision the proxy must have acknowledged before e is
// written: e's own when it is a live entry that redirects to the proxy,
// 0 otherwise.
func redirect(e *PolicyEntryRow) uint64 {
	if e.Deleted || e.Entry.ProxyPort == 0 {
		return 0
	}
	return e.Revision
}
