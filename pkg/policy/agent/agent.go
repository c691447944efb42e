package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// Agent runs the engine for the agent: one goroutine owns the engine,
// reads the policies' inputs from their tables and the API's questions
// from a queue, and writes the endpoints' policies.
type Agent struct {
	log     *slog.Logger
	db      *statedb.DB
	tbl     statedb.RWTable[*EndpointPolicyRow]
	entries statedb.RWTable[*PolicyEntryRow]
	changes statedb.RWTable[*PolicyChangeRow]
	cookies *policy.Cookies
	eps     statedb.Table[*endpoint.EndpointRow]
	clients *k8sagent.Clients
	// node is this node's name, which the policies' status names.
	node string
	// in are the Kubernetes tables the engine reads.
	in       inputTables
	mode     policy.Mode
	engine   *policy.Engine
	initDone func(statedb.WriteTxn)

	mu    sync.Mutex
	queue []func(*policy.Engine)
	wake  *desired.Signal

	// depPolicies are the Cilium policies that name Services or CIDR
	// groups, translated again when one of those changes. Owned by the
	// engine's goroutine.
	depPolicies map[policy.Origin]*dependentPolicy
	// refusals are the endpoints whose policy does not fit their maps,
	// as reported to the policies' authors through rep (nil without
	// Kubernetes). Owned by the engine's goroutine.
	refusals map[uint16]*policy.Refusal
	rep      *policyk8s.Reporter

	// prefixes is the table of the engine's CIDR identities, which the
	// ipcache reads; prefixesInit marks it initialized after the first
	// write.
	prefixes     statedb.RWTable[*ipcache.PolicyPrefixRow]
	prefixesInit func(statedb.WriteTxn)

	// policyRevision counts the changes of policies' rules, on the
	// engine's goroutine; pendingChanges are those not yet written to
	// the policy changes' table, the last of each policy.
	policyRevision uint64
	pendingChanges map[policy.Origin]*PolicyChangeRow
	// flushedRevision is policyRevision as of the last write: the
	// policy changes that the tables' entries include.
	flushedRevision uint64
	// l7Proxy: the node runs the layer-7 proxy.
	l7Proxy bool
}

// setRules sets origin's rules in the engine and counts the change, which
// the next write puts in the policy changes' table.
func (a *Agent) setRules(e *policy.Engine, origin policy.Origin, rules []policy.Rule) {
	e.SetRules(origin, rules)
	a.policyRevision++
	a.pendingChanges[origin] = &PolicyChangeRow{Origin: origin, Rules: len(rules), Revision: a.policyRevision}
}

// Enforced implements endpoint.PolicyGate.
func (a *Agent) Enforced() bool { return a.mode != policy.ModeNever }

// AwaitPolicy implements endpoint.PolicyGate: it waits for the engine to
// compute endpoint id's policy for identity num, then for the reconciler
// to put every entry of it into the map.
func (a *Agent) AwaitPolicy(ctx context.Context, id uint16, num identity.NumericIdentity) error {
	if !a.Enforced() {
		return nil
	}
	for {
		row, _, watch, ok := a.tbl.GetWatch(a.db.ReadTxn(), EndpointIndex.Query(id))
		if ok && row.Identity == num {
			if row.Refused != nil {
				return fmt.Errorf("policy refused: %s", row.Refused)
			}
			return a.AwaitEntries(ctx, id)
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return fmt.Errorf("policy not computed yet: %w", context.Cause(ctx))
		}
	}
}

// AwaitEntries waits for the reconciler to put every entry of endpoint
// id's policy, as computed so far, into its map.
func (a *Agent) AwaitEntries(ctx context.Context, id uint16) error {
	return desired.Await(ctx, a.db, a.entries, EntryEndpointIndex.Query(id), 0)
}

// SetFQDNNames gives the engine the names learned for each address
// (toFQDNs).
func (a *Agent) SetFQDNNames(names map[netip.Addr][]string) {
	a.do(func(e *policy.Engine) { e.SetFQDNNames(names) })
}

// do queues work for the engine's goroutine.
func (a *Agent) do(fn func(*policy.Engine)) {
	a.mu.Lock()
	a.queue = append(a.queue, fn)
	a.mu.Unlock()
	a.wake.Fire()
}

// start follows the engine's inputs and adds the controller that owns
// the engine: once the inputs hold everything, each run gives the engine
// their changes and the API's questions, and writes what changed.
func (a *Agent) start(jobs job.Group) error {
	in, inputs, err := a.follow()
	if err != nil {
		return err
	}
	initialized := false
	desired.Controller(jobs, "policy-engine", a.db, append(inputs, a.wake.Input()),
		func(ctx context.Context, txn statedb.ReadTxn) error {
			if !initialized && in.followsKubernetes() && a.clients != nil {
				a.rep = policyk8s.NewReporter(ctx, a.log, a.clients, a.node)
			}
			a.mu.Lock()
			work := a.queue
			a.queue = nil
			a.mu.Unlock()
			for _, fn := range work {
				fn(a.engine)
			}
			a.apply(in, txn)
			a.write(!initialized)
			initialized = true
			return nil
		})
	return nil
}

// write puts what the engine changed into the tables, in one
// transaction: only the entries that changed, so the reconciler writes
// only their groups.
func (a *Agent) write(markInitialized bool) {
	eps, changes := a.engine.Flush()
	a.flushedRevision = a.policyRevision
	a.publishPrefixes(markInitialized)
	if len(eps) == 0 && len(a.pendingChanges) == 0 && !markInitialized {
		return
	}
	txn := a.db.WriteTxn(a.tbl, a.entries, a.changes)
	defer txn.Abort()
	if err := writePolicyChanges(txn, a.changes, a.pendingChanges); err != nil {
		a.log.Error("write policy changes", "error", err)
	}
	clear(a.pendingChanges)
	var rev uint64
	for _, st := range eps {
		rev = max(rev, st.Revision)
	}
	var resync []uint16
	for _, st := range eps {
		switch {
		case st.Deleted:
			_, _, _ = a.tbl.Delete(txn, &EndpointPolicyRow{EndpointID: st.ID})
			a.tombstoneEntries(txn, st.ID, nil, rev)
		case st.Refused != nil:
			// The entries stay as they were: the policy of before.
			row := &EndpointPolicyRow{EndpointID: st.ID, Revision: st.Revision}
			if old, _, ok := a.tbl.Get(txn, EndpointIndex.Query(st.ID)); ok {
				row = old.clone()
			}
			row.Identity, row.Refused = st.Identity, st.Refused
			_, _, _ = a.tbl.Insert(txn, row)
		case st.Ready:
			row := &EndpointPolicyRow{EndpointID: st.ID, Identity: st.Identity, Revision: st.Revision,
				EnforceIngress: st.EnforceIngress, EnforceEgress: st.EnforceEgress, L7: st.L7}
			_, _, _ = a.tbl.Insert(txn, row)
			if st.Resync {
				resync = append(resync, st.ID)
			}
		}
	}
	keep := map[uint16]map[spec.PolicyEntry]bool{}
	for _, c := range changes {
		a.writeEntry(txn, c, rev)
		if keep[c.EndpointID] == nil {
			keep[c.EndpointID] = map[spec.PolicyEntry]bool{}
		}
		keep[c.EndpointID][c.Entry] = true
	}
	for _, id := range resync {
		a.tombstoneEntries(txn, id, keep[id], rev)
	}
	if markInitialized {
		a.initDone(txn)
	}
	txn.Commit()
	a.reportRefusals(eps)
}

// reportRefusals tells the authors of the policies that endpoints' maps
// do not fit, or fit again, which endpoints of this node refuse them.
func (a *Agent) reportRefusals(eps []policy.EndpointStatus) {
	touched := map[policy.Origin]bool{}
	for _, st := range eps {
		prev, now := a.refusals[st.ID], st.Refused
		if prev != nil && now != nil && *prev == *now {
			continue
		}
		if prev != nil {
			touched[prev.Origin] = true
		}
		if now != nil {
			touched[now.Origin] = true
			a.refusals[st.ID] = now
		} else {
			delete(a.refusals, st.ID)
		}
	}
	if len(touched) == 0 {
		return
	}
	txn := a.db.ReadTxn()
	for o := range touched {
		var refused []string
		size := 0
		for _, id := range slices.Sorted(maps.Keys(a.refusals)) {
			r := a.refusals[id]
			if r.Origin != o {
				continue
			}
			size = r.Max
			name := strconv.Itoa(int(id))
			if ep, _, ok := a.eps.Get(txn, endpoint.IDIndex.Query(id)); ok && ep.PodName != "" {
				name += " (" + ep.PodNamespace + "/" + ep.PodName + ")"
			}
			refused = append(refused, name)
		}
		msg := ""
		if len(refused) > 0 {
			msg = fmt.Sprintf("endpoint %s: its policy would need more than %d policy map entries (--bpf-policy-map-max); the previous policy stays in force",
				strings.Join(refused, ", "), size)
			a.log.Warn("policy refused: an endpoint's policy map cannot hold it", "policy", o.String(), "endpoints", refused, "max", size)
		}
		if a.rep != nil {
			a.rep.ReportRefusal(o, msg)
		}
	}
}

// writeEntry inserts a changed entry, or turns a removed one into a
// tombstone that the reconciler removes from the map.
func (a *Agent) writeEntry(txn statedb.WriteTxn, c policy.EntryChange, rev uint64) {
	old, _, found := a.entries.Get(txn, EntryIndex.Query(entryID{c.EndpointID, c.Entry}))
	row := &PolicyEntryRow{EndpointID: c.EndpointID, Entry: c.Entry, Origins: c.Origins, Revision: rev,
		Status: reconciler.StatusPending()}
	switch {
	case len(c.Origins) == 0 && (!found || old.Deleted):
		return
	case len(c.Origins) == 0:
		row.Deleted = true
	case found && !old.Deleted && slices.Equal(old.Origins, c.Origins):
		return
	}
	if _, _, err := a.entries.Insert(txn, row); err != nil {
		a.log.Error("write policy entry", "endpoint", c.EndpointID, "entry", c.Entry.String(), "error", err)
	}
}

// tombstoneEntries turns every live entry of an endpoint but those of
// keep into a tombstone.
func (a *Agent) tombstoneEntries(txn statedb.WriteTxn, id uint16, keep map[spec.PolicyEntry]bool, rev uint64) {
	var gone []spec.PolicyEntry
	for e := range a.entries.List(txn, EntryEndpointIndex.Query(id)) {
		if !e.Deleted && !keep[e.Entry] {
			gone = append(gone, e.Entry)
		}
	}
	for _, ent := range gone {
		a.writeEntry(txn, policy.EntryChange{EndpointID: id, Entry: ent}, rev)
	}
}
