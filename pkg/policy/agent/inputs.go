package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cilium-go/cilium/pkg/endpoint"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// inputTables are the Kubernetes tables the engine reads (empty without
// Kubernetes).
type inputTables struct {
	Pods             statedb.Table[*corev1.Pod]
	Services         statedb.Table[*corev1.Service]
	EndpointSlices   statedb.Table[*discoveryv1.EndpointSlice]
	NetworkPolicies  statedb.Table[*networkingv1.NetworkPolicy]
	CNPs             statedb.Table[*v2.CiliumNetworkPolicy]
	CCNPs            statedb.Table[*v2.CiliumClusterwideNetworkPolicy]
	CiliumIdentities statedb.Table[*v2.CiliumIdentity]
	CiliumEndpoints  statedb.Table[*v2.CiliumEndpoint]
	CIDRGroups       statedb.Table[*v2.CiliumCIDRGroup]
}

// follower reads one table's changes with a change iterator. With gens,
// it skips the changes that leave an object's generation as it was, and
// the deletions of objects it never passed on.
type follower[T tables.Object] struct {
	table statedb.Table[T]
	iter  statedb.ChangeIterator[T]
	gens  generations
}

func newFollower[T tables.Object](t statedb.Table[T], byGeneration bool) *follower[T] {
	f := &follower[T]{table: t}
	if byGeneration {
		f.gens = generations{}
	}
	return f
}

// start creates the change iterator; txn must lock the table.
func (f *follower[T]) start(txn statedb.WriteTxn) error {
	it, err := f.table.Changes(txn)
	if err != nil {
		return fmt.Errorf("follow %s: %w", f.table.Name(), err)
	}
	f.iter = it
	return nil
}

func (f *follower[T]) meta() statedb.TableMeta { return f.table }

// next passes fn the changes up to txn, and adds to ws the channel that
// closes at the table's next change.
func (f *follower[T]) next(txn statedb.ReadTxn, ws *statedb.WatchSet, fn func(key string, obj T, deleted bool)) {
	changes, watch := f.iter.Next(txn)
	ws.Add(watch)
	for c := range changes {
		key := tables.Key(c.Object)
		v := version{uid: c.Object.GetUID(), generation: c.Object.GetGeneration()}
		if f.gens != nil && !f.gens.apply(key, v, c.Deleted) {
			continue
		}
		fn(key, c.Object, c.Deleted)
	}
}

// generations remember the version of each object passed on, by key: a
// change iterator gives no old object to compare with.
type generations map[string]version

// version is an object's identity (its UID: an object deleted and made
// again under its name between two looks is another) and its generation.
type version struct {
	uid        types.UID
	generation int64
}

// apply records a change and says whether it may change what the engine
// reads of the object: not when its generation stayed, which the API
// server bumps on every change but those of metadata and, where the kind
// has a status subresource (Cilium's policies), of status. That skips the
// reflectors' relists and the agents' own policy status writes.
// Generation 0 (a fake API server's objects) always counts as changed. A
// deletion counts when the object was passed on: one that came and went
// between two looks was never heard of.
func (g generations) apply(key string, v version, deleted bool) bool {
	old, had := g[key]
	if deleted {
		delete(g, key)
		return had
	}
	g[key] = v
	return !had || v.generation == 0 || old != v
}

// inputs are the engine's followers of its tables, and what it must
// remember of their objects between changes.
type inputs struct {
	endpoints       statedb.ChangeIterator[*endpoint.EndpointRow]
	networkPolicies *follower[*networkingv1.NetworkPolicy]
	cnps            *follower[*v2.CiliumNetworkPolicy]
	ccnps           *follower[*v2.CiliumClusterwideNetworkPolicy]
	identities      *follower[*v2.CiliumIdentity]
	ciliumEndpoints *follower[*v2.CiliumEndpoint]
	cidrGroups      *follower[*v2.CiliumCIDRGroup]
	services        *follower[*corev1.Service]
	endpointSlices  *follower[*discoveryv1.EndpointSlice]

	// namedPorts are the named ports of the CiliumEndpoints, by identity.
	namedPorts namedPorts
	// sliceServices are the Service each EndpointSlice last named, by
	// the slice's key: a slice that moves touches both Services.
	sliceServices map[string]string
}

// startable is a follower, of any table, before it starts.
type startable interface {
	start(statedb.WriteTxn) error
	meta() statedb.TableMeta
}

// kubernetes are the followers of Kubernetes tables.
func (in *inputs) kubernetes() []startable {
	return []startable{in.networkPolicies, in.cnps, in.ccnps, in.identities, in.ciliumEndpoints,
		in.cidrGroups, in.services, in.endpointSlices}
}

// followsKubernetes: the engine reads the Kubernetes tables (unless
// policy is never enforced).
func (in *inputs) followsKubernetes() bool { return in.networkPolicies != nil }

// follow starts following the endpoints and, unless policy is never
// enforced, the Kubernetes tables, all from one transaction. It returns
// the tables the first write must wait for.
func (a *Agent) follow() (*inputs, []statedb.TableMeta, error) {
	in := &inputs{sliceServices: map[string]string{}, namedPorts: namedPorts{}}
	waitFor := []statedb.TableMeta{a.eps}
	var followed []startable
	if a.mode != policy.ModeNever {
		in.networkPolicies = newFollower(a.in.NetworkPolicies, true)
		in.cnps = newFollower(a.in.CNPs, true)
		in.ccnps = newFollower(a.in.CCNPs, true)
		in.identities = newFollower(a.in.CiliumIdentities, true)
		in.ciliumEndpoints = newFollower(a.in.CiliumEndpoints, true)
		// A change of these names no generation that says whether
		// translations read it (labels and addresses do not bump it).
		in.cidrGroups = newFollower(a.in.CIDRGroups, false)
		in.services = newFollower(a.in.Services, false)
		in.endpointSlices = newFollower(a.in.EndpointSlices, false)
		followed = in.kubernetes()
	}
	locked := []statedb.TableMeta{a.eps}
	for _, f := range followed {
		locked = append(locked, f.meta())
		waitFor = append(waitFor, f.meta())
	}
	txn := a.db.WriteTxn(locked...)
	defer txn.Abort()
	var err error
	in.endpoints, err = a.eps.Changes(txn)
	if err != nil {
		return nil, nil, fmt.Errorf("follow %s: %w", a.eps.Name(), err)
	}
	for _, f := range followed {
		err = errors.Join(err, f.start(txn))
	}
	if err != nil {
		return nil, nil, err
	}
	txn.Commit()
	return in, waitFor, nil
}

// awaitInitialized returns once every table in ts holds everything: the
// endpoints restored, the Kubernetes objects listed. The first write
// then holds every endpoint's policy under every policy, and only then
// may the reconciler prune what an earlier run left.
func (a *Agent) awaitInitialized(ctx context.Context, ts []statedb.TableMeta) error {
	for _, t := range ts {
		_, initialized := t.Initialized(a.db.ReadTxn())
		select {
		case <-initialized:
		case <-ctx.Done():
			return fmt.Errorf("table %s not initialized: %w", t.Name(), context.Cause(ctx))
		}
	}
	return nil
}

// apply gives the engine every change of its inputs up to txn, and adds
// to ws the channels that close at their next changes.
func (a *Agent) apply(in *inputs, txn statedb.ReadTxn, ws *statedb.WatchSet) {
	if in.followsKubernetes() {
		a.applyKubernetes(in, txn, ws)
	}
	evs, watch := in.endpoints.Next(txn)
	ws.Add(watch)
	for ev := range evs {
		a.endpointChanged(txn, ev.Object, endpoint.Gone(ev))
	}
}

// applyKubernetes gives the engine the changes of the Kubernetes tables.
// The Services and CIDR groups come first, so that the policies
// translated after them and those translated again read the same.
func (a *Agent) applyKubernetes(in *inputs, txn statedb.ReadTxn, ws *statedb.WatchSet) {
	c := a.clusterAt(txn)
	a.translateDependents(c, a.touchedDependencies(in, txn, ws))
	followPolicies(a, in.networkPolicies, txn, ws, c, policy.KindNetworkPolicy, translateNetworkPolicy)
	followPolicies(a, in.cnps, txn, ws, c, policy.KindCNP, policyk8s.TranslateCNP)
	followPolicies(a, in.ccnps, txn, ws, c, policy.KindCCNP, policyk8s.TranslateCCNP)
	in.identities.next(txn, ws, a.identityChanged)
	in.ciliumEndpoints.next(txn, ws, func(key string, cep *v2.CiliumEndpoint, deleted bool) {
		for id, ports := range in.namedPorts.apply(key, cep, deleted) {
			a.engine.SetNamedPorts(id, ports)
		}
	})
}
