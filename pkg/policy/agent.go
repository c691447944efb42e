package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/ciliumendpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// Config holds the policy engine's flags.
type Config struct {
	EnablePolicy string
}

// DefaultConfig is Cilium's default: isolate what rules select.
var DefaultConfig = Config{EnablePolicy: string(ModeDefault)}

// Flags implements cell.Flagger.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("enable-policy", def.EnablePolicy,
		"Policy enforcement: default (endpoints that rules select are isolated), always (every endpoint is), never")
}

// EngineCell runs the policy engine: it reads NetworkPolicies,
// CiliumNetworkPolicies, CiliumClusterwideNetworkPolicies, the cluster's
// identities and the local endpoints, and writes every endpoint's policy
// into the table that the policy map's reconciler programs. It provides
// the endpoint manager's PolicyGate.
var EngineCell = cell.Module("policy", "Network policy rules to endpoints policy map entries",
	cell.Config(DefaultConfig),
	cell.Provide(newAgent, func(a *Agent) endpoint.PolicyGate { return a }, func(a *Agent) ipcache.PrefixSource { return a }),
	health.JobGroup,
	cell.Invoke(func(jobs job.Group, a *Agent) {
		jobs.Add(job.OneShot("policy-engine", a.run), job.OneShot("policy-tombstones", a.collectTombstones))
	}),
)

// Agent runs the engine for the agent: one goroutine owns the engine,
// and everything else hands it work through a queue.
type Agent struct {
	log      *slog.Logger
	db       *statedb.DB
	tbl      statedb.RWTable[*EndpointPolicy]
	entries  statedb.RWTable[*MapEntry]
	cookies  *Cookies
	eps      statedb.Table[*endpoint.Desired]
	clients  *k8sagent.Clients
	watchers *k8sagent.Watchers
	// services are the Services and EndpointSlices toServices name;
	// cluster has them (a nil interface without Kubernetes) and the
	// CIDR groups for translations.
	services *k8sagent.ServiceSource
	cluster  Cluster
	mode     Mode
	engine   *Engine
	initDone func(statedb.WriteTxn)

	mu    sync.Mutex
	queue []func(*Engine)
	wake  chan struct{}

	// depPolicies are the Cilium policies that name Services or CIDR
	// groups, translated again when one of those changes. Owned by the
	// engine's goroutine.
	depPolicies map[Origin]*dependentPolicy
	// refusals are the endpoints whose policy does not fit their maps,
	// as reported to the policies' authors through rep (nil without
	// Kubernetes). Owned by the engine's goroutine.
	refusals map[uint16]*Refusal
	rep      *reporter

	// prefixes is the engine's CIDR identities as last written, for the
	// ipcache, which onPrefixes wakes.
	prefixMu   sync.Mutex
	prefixes   []ipcache.PolicyPrefix
	onPrefixes map[int]func()
	nextOn     int

	// onPolicy are told of each policy's change (OnPolicyChange), on the
	// engine's goroutine, which alone counts policyRevision.
	onPolicyMu     sync.Mutex
	onPolicy       []func(PolicyChange)
	policyRevision uint64
	// flushedRevision is policyRevision as of the last write: the
	// policy changes that the tables' entries include.
	flushedRevision uint64
}

// PolicyChange is a policy whose rules were set, or removed (Rules 0).
// Revision counts the changes of the agent's policies.
type PolicyChange struct {
	Origin   Origin
	Rules    int
	Revision uint64
}

// OnPolicyChange calls fn after each change of a policy's rules, on the
// engine's goroutine: fn must not block.
func (a *Agent) OnPolicyChange(fn func(PolicyChange)) {
	a.onPolicyMu.Lock()
	defer a.onPolicyMu.Unlock()
	a.onPolicy = append(a.onPolicy, fn)
}

// setRules sets origin's rules in the engine and tells who asked.
func (a *Agent) setRules(e *Engine, origin Origin, rules []Rule) {
	e.SetRules(origin, rules)
	a.policyRevision++
	a.onPolicyMu.Lock()
	fns := slices.Clone(a.onPolicy)
	a.onPolicyMu.Unlock()
	for _, fn := range fns {
		fn(PolicyChange{Origin: origin, Rules: len(rules), Revision: a.policyRevision})
	}
}

type agentParams struct {
	cell.In
	Config    Config
	Log       *slog.Logger
	DB        *statedb.DB
	Table     statedb.RWTable[*EndpointPolicy]
	Entries   statedb.RWTable[*MapEntry]
	Cookies   *Cookies
	Endpoints statedb.Table[*endpoint.Desired]
	Clients   *k8sagent.Clients       `optional:"true"`
	Watchers  *k8sagent.Watchers      `optional:"true"`
	Services  *k8sagent.ServiceSource `optional:"true"`
	// MapConfig sizes the policy maps the engine's endpoints must fit.
	MapConfig MapConfig `optional:"true"`
}

func newAgent(p agentParams) (*Agent, error) {
	mode, err := ParseMode(p.Config.EnablePolicy)
	if err != nil {
		return nil, err
	}
	txn := p.DB.WriteTxn(p.Entries)
	done := p.Entries.RegisterInitializer(txn, "policy-engine")
	txn.Commit()
	a := &Agent{log: p.Log, db: p.DB, tbl: p.Table, entries: p.Entries, cookies: p.Cookies, eps: p.Endpoints, clients: p.Clients, watchers: p.Watchers,
		services: p.Services, mode: mode, engine: NewEngine(mode), initDone: done, wake: make(chan struct{}, 1),
		depPolicies: map[Origin]*dependentPolicy{}, onPrefixes: map[int]func(){}, refusals: map[uint16]*Refusal{}}
	if p.Services != nil {
		a.cluster.Services = p.Services
	}
	a.engine.LimitEntries(p.MapConfig.BPFPolicyMapMax)
	return a, nil
}

// Enforced implements endpoint.PolicyGate.
func (a *Agent) Enforced() bool { return a.mode != ModeNever }

// AwaitPolicy implements endpoint.PolicyGate.
func (a *Agent) AwaitPolicy(ctx context.Context, id uint16, num identity.NumericIdentity) error {
	if !a.Enforced() {
		return nil
	}
	for {
		r := a.realization(a.db.ReadTxn(), id)
		if r.known && r.row.Identity == num {
			switch {
			case r.row.Refused != nil:
				return fmt.Errorf("policy refused: %s", r.row.Refused)
			case r.err != "":
				return errors.New(r.err)
			case r.realized >= r.row.Revision:
				return nil
			}
		}
		select {
		case <-r.watch:
		case <-r.entriesWatch:
		case <-ctx.Done():
			return fmt.Errorf("policy not in place yet: %w", context.Cause(ctx))
		}
	}
}

// realization is how far an endpoint's policy got into the datapath.
type realization struct {
	row      *EndpointPolicy
	known    bool
	realized uint64 // the revision the datapath holds
	err      string // an entry the reconciler failed to write
	// watch and entriesWatch close when the row or its entries change.
	watch, entriesWatch <-chan struct{}
}

// realization reads it: the datapath holds revision R once no entry
// written at or before R is still to be reconciled.
func (a *Agent) realization(txn statedb.ReadTxn, id uint16) realization {
	var r realization
	r.row, _, r.watch, r.known = a.tbl.GetWatch(txn, EndpointIndex.Query(id))
	rows, watch := a.entries.ListWatch(txn, EntryEndpointIndex.Query(id))
	r.entriesWatch = watch
	if !r.known {
		return r
	}
	r.realized = r.row.Revision
	for e := range rows {
		switch e.Status.Kind {
		case reconciler.StatusKindDone:
			continue
		case reconciler.StatusKindError:
			r.err = e.Status.GetError()
		}
		r.realized = min(r.realized, e.Revision-1)
	}
	return r
}

// do queues work for the engine's goroutine.
func (a *Agent) do(fn func(*Engine)) {
	a.mu.Lock()
	a.queue = append(a.queue, fn)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Agent) run(ctx context.Context, h cell.Health) error {
	if a.watchers != nil && a.mode != ModeNever {
		if err := a.watch(ctx); err != nil {
			return err
		}
	}
	wtxn := a.db.WriteTxn(a.eps)
	changes, err := a.eps.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		return err
	}
	// Restored endpoints are in the table once it is initialized: the
	// first rows written then hold every endpoint's policy, and only
	// then may the reconciler prune what an earlier run left.
	if err := a.awaitEndpointsInitialized(ctx); err != nil {
		return err
	}
	initialized := false
	for {
		a.mu.Lock()
		work := a.queue
		a.queue = nil
		a.mu.Unlock()
		for _, fn := range work {
			fn(a.engine)
		}
		evs, watch := changes.Next(a.db.ReadTxn())
		for ev := range evs {
			a.endpointChanged(ev.Object, ev.Deleted)
		}
		a.write(!initialized)
		initialized = true
		h.OK(fmt.Sprintf("%d endpoints", len(a.engine.eps)))
		select {
		case <-ctx.Done():
			return nil
		case <-a.wake:
		case <-watch:
		}
	}
}

func (a *Agent) awaitEndpointsInitialized(ctx context.Context) error {
	for {
		ok, watch := a.eps.Initialized(a.db.ReadTxn())
		if ok {
			return nil
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (a *Agent) endpointChanged(d *endpoint.Desired, deleted bool) {
	if deleted {
		a.engine.DeleteEndpoint(d.ID)
		return
	}
	var ports NamedPorts
	if a.watchers != nil {
		if pod, ok := a.watchers.Pod(d.PodNamespace, d.PodName); ok {
			ports = namedPorts(ciliumendpoint.NamedPorts(pod))
		}
	}
	a.engine.UpsertEndpoint(EndpointInfo{ID: d.ID, Identity: d.Identity, NamedPorts: ports})
}

// namedPorts reads a CiliumEndpoint's named ports; the protocols are
// Kubernetes' names.
func namedPorts(ports []v2.NamedPort) NamedPorts {
	var out NamedPorts
	for _, p := range ports {
		proto, ok := k8sProtocol(corev1.Protocol(p.Protocol))
		if ok && p.Name != "" && p.Port != 0 {
			out = append(out, NamedPort{Name: p.Name, Protocol: proto, Port: p.Port})
		}
	}
	return out
}

func k8sProtocol(p corev1.Protocol) (uint8, bool) {
	switch p {
	case "", corev1.ProtocolTCP:
		return spec.ProtoTCP, true
	case corev1.ProtocolUDP:
		return spec.ProtoUDP, true
	case corev1.ProtocolSCTP:
		return spec.ProtoSCTP, true
	}
	return 0, false
}

// Prefixes implements ipcache.PrefixSource.
func (a *Agent) Prefixes() []ipcache.PolicyPrefix {
	a.prefixMu.Lock()
	defer a.prefixMu.Unlock()
	return a.prefixes
}

// OnChange implements ipcache.PrefixSource: fn runs when the prefixes
// change.
func (a *Agent) OnChange(fn func()) (stop func()) {
	a.prefixMu.Lock()
	defer a.prefixMu.Unlock()
	n := a.nextOn
	a.nextOn++
	a.onPrefixes[n] = fn
	return func() {
		a.prefixMu.Lock()
		defer a.prefixMu.Unlock()
		delete(a.onPrefixes, n)
	}
}

// publishPrefixes hands the engine's prefixes to the ipcache when they
// changed. The ipcache has them before the entries that name their
// identities are reconciled or soon after; either way an address is
// judged by an identity the policy map knows or by the world's.
func (a *Agent) publishPrefixes() {
	if !a.engine.cidrsChanged {
		return
	}
	a.engine.cidrsChanged = false
	prefixes := a.engine.Prefixes()
	a.prefixMu.Lock()
	a.prefixes = prefixes
	fns := slices.Collect(maps.Values(a.onPrefixes))
	a.prefixMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// write puts what the engine changed into the tables, in one
// transaction: only the entries that changed, so the reconciler writes
// only their groups.
func (a *Agent) write(markInitialized bool) {
	eps, changes := a.engine.Flush()
	a.flushedRevision = a.policyRevision
	a.publishPrefixes()
	if len(eps) == 0 && !markInitialized {
		return
	}
	txn := a.db.WriteTxn(a.tbl, a.entries)
	defer txn.Abort()
	var rev uint64
	for _, st := range eps {
		rev = max(rev, st.Revision)
	}
	var resync []uint16
	for _, st := range eps {
		switch {
		case st.Deleted:
			_, _, _ = a.tbl.Delete(txn, &EndpointPolicy{EndpointID: st.ID})
			a.tombstoneEntries(txn, st.ID, nil, rev)
		case st.Refused != nil:
			// The entries stay as they were: the policy of before.
			row := &EndpointPolicy{EndpointID: st.ID, Revision: st.Revision}
			if old, _, ok := a.tbl.Get(txn, EndpointIndex.Query(st.ID)); ok {
				row = old.clone()
			}
			row.Identity, row.Refused = st.Identity, st.Refused
			_, _, _ = a.tbl.Insert(txn, row)
		case st.Ready:
			row := &EndpointPolicy{EndpointID: st.ID, Identity: st.Identity, Revision: st.Revision,
				EnforceIngress: st.EnforceIngress, EnforceEgress: st.EnforceEgress}
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
func (a *Agent) reportRefusals(eps []EndpointStatus) {
	touched := map[Origin]bool{}
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
			a.rep.refusal(o, msg)
		}
	}
}

// writeEntry inserts a changed entry, or turns a removed one into a
// tombstone that the reconciler removes from the map.
func (a *Agent) writeEntry(txn statedb.WriteTxn, c EntryChange, rev uint64) {
	old, _, found := a.entries.Get(txn, EntryIndex.Query(entryID{c.EndpointID, c.Entry}))
	row := &MapEntry{EndpointID: c.EndpointID, Entry: c.Entry, Origins: c.Origins, Revision: rev,
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
		a.writeEntry(txn, EntryChange{EndpointID: id, Entry: ent}, rev)
	}
}

// collectTombstones deletes the tombstones whose entries left the map.
func (a *Agent) collectTombstones(ctx context.Context, _ cell.Health) error {
	for {
		rows, watch := a.entries.ListWatch(a.db.ReadTxn(), DeletedIndex.Query(true))
		var done []*MapEntry
		for e := range rows {
			if e.Status.Kind == reconciler.StatusKindDone {
				done = append(done, e)
			}
		}
		if len(done) > 0 {
			txn := a.db.WriteTxn(a.entries)
			for _, e := range done {
				// Only if still the same tombstone: the engine may have
				// brought the entry back meanwhile.
				if cur, _, ok := a.entries.Get(txn, EntryIndex.Query(entryID{e.EndpointID, e.Entry})); ok && cur.Deleted &&
					cur.Status.Kind == reconciler.StatusKindDone {
					_, _, _ = a.entries.Delete(txn, cur)
				}
			}
			txn.Commit()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		}
	}
}

// watch starts the informers of policies and identities, feeding the
// engine, and waits until they listed everything. The Services that
// toServices name and the CIDR groups are listed first, so that the
// first translation of a policy already sees them.
func (a *Agent) watch(ctx context.Context) error {
	if a.services != nil {
		a.services.OnChange(a.serviceChanged)
		if err := a.services.StartServices(ctx); err != nil {
			return err
		}
	}
	if err := a.watchCIDRGroups(ctx); err != nil {
		return err
	}
	db, t := a.watchers.DB(), a.watchers.Tables()
	rep := newReporter(ctx, a.log, a.clients, a.watchers.NodeName)
	a.rep = rep
	var synced []cache.InformerSynced
	follow := func(ch <-chan struct{}, err error) error {
		synced = append(synced, closed(ch))
		return err
	}
	err := errors.Join(
		follow(tables.Follow(ctx, db, t.NetworkPolicies, a.policyHandler(ctx, rep, KindNetworkPolicy,
			func(obj any, _ Cluster) ([]Rule, dependencies, error) {
				rules, err := FromNetworkPolicy(obj.(*networkingv1.NetworkPolicy))
				return rules, dependencies{}, err
			}))),
		follow(tables.Follow(ctx, db, t.CNPs, a.policyHandler(ctx, rep, KindCNP,
			func(obj any, c Cluster) ([]Rule, dependencies, error) {
				return fromCNP(obj.(*v2.CiliumNetworkPolicy), c)
			}))),
		follow(tables.Follow(ctx, db, t.CCNPs, a.policyHandler(ctx, rep, KindCCNP,
			func(obj any, c Cluster) ([]Rule, dependencies, error) {
				return fromCCNP(obj.(*v2.CiliumClusterwideNetworkPolicy), c)
			}))),
		follow(tables.Follow(ctx, db, t.CiliumIdentities, a.identityHandler())),
		follow(tables.Follow(ctx, db, t.CiliumEndpoints, a.namedPortsHandler())),
	)
	if err != nil {
		return err
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("policy caches not synced")
	}
	return nil
}

// closed says whether ch is closed, as cache.InformerSynced.
func closed(ch <-chan struct{}) cache.InformerSynced {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// translateFunc translates a policy object, with the Services and CIDR
// groups it may name, and says which of them it depends on.
type translateFunc func(obj any, c Cluster) ([]Rule, dependencies, error)

// policyHandler turns a policy object into rules for the engine. An
// object that does not translate is reported (an event, and the Valid
// condition of Cilium's policies) and its previous rules stay in force:
// bad input never half-applies.
func (a *Agent) policyHandler(ctx context.Context, rep *reporter, kind string, translate translateFunc) cache.ResourceEventHandler {
	set := func(obj any) {
		meta, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		origin := Origin{Kind: kind, Namespace: meta.GetNamespace(), Name: meta.GetName()}
		rs, refs, err := translate(obj, a.cluster)
		if err != nil {
			a.log.Warn("policy refused, its previous rules stay in force", "policy", origin.String(), "error", err)
		}
		if !reported(obj, err) {
			rep.report(kind, meta, err)
		}
		if err != nil {
			return
		}
		if refs.empty() {
			a.do(func(e *Engine) {
				delete(a.depPolicies, origin)
				a.setRules(e, origin, rs)
			})
			return
		}
		sp := &dependentPolicy{translate: func(c Cluster) ([]Rule, dependencies, error) { return translate(obj, c) }, refs: refs}
		a.do(func(e *Engine) {
			a.depPolicies[origin] = sp
			// Translated again on the engine's goroutine: a Service or
			// group that changed since the translation above may have
			// been handled before the policy was known here.
			a.translateAgain(e, origin, sp)
		})
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: set,
		UpdateFunc: func(oldObj, obj any) {
			if changed(oldObj, obj) {
				set(obj)
			}
		},
		DeleteFunc: func(obj any) {
			key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			origin := Origin{Kind: kind, Namespace: ns, Name: name}
			a.do(func(e *Engine) {
				delete(a.depPolicies, origin)
				a.setRules(e, origin, nil)
			})
		},
	}
}

// dependentPolicy is a Cilium policy that names Services or CIDR
// groups: translate translates its object.
type dependentPolicy struct {
	translate func(c Cluster) ([]Rule, dependencies, error)
	refs      dependencies
}

// serviceChanged queues the translation, again, of the policies that may
// name the Service n, whose object or EndpointSlices changed.
func (a *Agent) serviceChanged(n loadbalancer.ServiceName) {
	if _, hostPort := n.HostPortPod(); hostPort {
		return
	}
	a.do(func(e *Engine) {
		for origin, sp := range a.depPolicies {
			if sp.refs.services.concerns(n.Namespace, n.Name) {
				a.translateAgain(e, origin, sp)
			}
		}
	})
}

// translateAgain translates a policy with the Services and CIDR groups
// as they are now; the engine changes only if the rules did.
func (a *Agent) translateAgain(e *Engine, origin Origin, sp *dependentPolicy) {
	rs, _, err := sp.translate(a.cluster)
	if err != nil {
		// The same object translated before; only Services or groups
		// changed, and they are no error.
		a.log.Error("policy no longer translates, its previous rules stay in force", "policy", origin.String(), "error", err)
		return
	}
	if !sameRules(e.rules[origin], rs) {
		a.setRules(e, origin, rs)
	}
}

func (a *Agent) identityHandler() cache.ResourceEventHandler {
	set := func(obj any) {
		ci, ok := obj.(*v2.CiliumIdentity)
		if !ok {
			return
		}
		num, err := identity.ParseNumeric(ci.Name)
		if err != nil || !num.IsCluster() {
			return
		}
		id := &Identity{ID: num, Labels: labels.FromClusterIdentity(ci.SecurityLabels)}
		a.do(func(e *Engine) { e.UpsertIdentity(id) })
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: set,
		UpdateFunc: func(oldObj, obj any) {
			if changed(oldObj, obj) {
				set(obj)
			}
		},
		DeleteFunc: func(obj any) {
			key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if num, err := identity.ParseNumeric(key); err == nil {
				a.do(func(e *Engine) { e.DeleteIdentity(num) })
			}
		},
	}
}

// namedPortsHandler keeps the engine's named ports of each identity: the
// union over the CiliumEndpoints that have it.
func (a *Agent) namedPortsHandler() cache.ResourceEventHandler {
	var mu sync.Mutex
	type published struct {
		id    identity.NumericIdentity
		ports NamedPorts
	}
	byCEP := map[string]published{}
	update := func(key string, now *published) {
		mu.Lock()
		defer mu.Unlock()
		old, had := byCEP[key]
		if now == nil {
			delete(byCEP, key)
		} else {
			byCEP[key] = *now
		}
		var affected []identity.NumericIdentity
		if had {
			affected = append(affected, old.id)
		}
		if now != nil && (!had || now.id != old.id) {
			affected = append(affected, now.id)
		}
		for _, id := range affected {
			var union NamedPorts
			for _, p := range byCEP {
				if p.id == id {
					union = append(union, p.ports...)
				}
			}
			slices.SortFunc(union, compareNamedPorts)
			union = slices.Compact(union)
			a.do(func(e *Engine) { e.SetNamedPorts(id, union) })
		}
	}
	set := func(obj any) {
		cep, ok := obj.(*v2.CiliumEndpoint)
		if !ok || cep.Status.Identity == nil {
			return
		}
		key := cep.Namespace + "/" + cep.Name
		update(key, &published{id: identity.NumericIdentity(cep.Status.Identity.ID), ports: namedPorts(cep.Status.NamedPorts)})
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: set,
		UpdateFunc: func(oldObj, obj any) {
			if changed(oldObj, obj) {
				set(obj)
			}
		},
		DeleteFunc: func(obj any) {
			key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			update(key, nil)
		},
	}
}

func compareNamedPorts(x, y NamedPort) int {
	return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Protocol, y.Protocol), cmp.Compare(x.Port, y.Port))
}

// reported says whether obj's Valid condition already tells err.
// changed reports whether an update may change what the engine reads of
// an object: not when its generation stayed, which the API server bumps
// on every change but those of metadata and, where the kind has a status
// subresource (Cilium's policies), of status. That skips the informers'
// resyncs and the agents' own policy status writes. Generation 0 (a fake
// API server's objects) always counts as changed.
func changed(oldObj, obj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	return !ok1 || !ok2 || n.GetGeneration() == 0 || o.GetGeneration() != n.GetGeneration()
}

func reported(obj any, err error) bool {
	var st *v2.CiliumNetworkPolicyStatus
	switch p := obj.(type) {
	case *v2.CiliumNetworkPolicy:
		st = &p.Status
	case *v2.CiliumClusterwideNetworkPolicy:
		st = &p.Status
	default:
		return false
	}
	for _, c := range st.Conditions {
		if c.Type == ConditionValid {
			return (err == nil && c.Status == metav1.ConditionTrue) ||
				(err != nil && c.Status == metav1.ConditionFalse && c.Message == err.Error())
		}
	}
	return false
}
