package agent

import (
	"errors"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cilium-go/cilium/pkg/desired"
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

// follower reads one table's changes. With gens, it skips the changes
// that leave an object's generation as it was, and the deletions of
// objects it never passed on. A nil follower has no changes.
type follower[T tables.Object] struct {
	f    *desired.Follower[T]
	gens generations
}

// newFollower starts following t's changes.
func newFollower[T tables.Object](db *statedb.DB, t statedb.Table[T], byGeneration bool) (*follower[T], error) {
	f, err := desired.Follow(db, t)
	if err != nil {
		return nil, err
	}
	out := &follower[T]{f: f}
	if byGeneration {
		out.gens = generations{}
	}
	return out, nil
}

// next passes fn the changes up to txn.
func (f *follower[T]) next(txn statedb.ReadTxn, fn func(key string, obj T, deleted bool)) {
	if f == nil {
		return
	}
	f.f.Next(txn, func(obj T, deleted bool) {
		key := tables.Key(obj)
		v := version{uid: obj.GetUID(), generation: obj.GetGeneration()}
		if f.gens != nil && !f.gens.apply(key, v, deleted) {
			return
		}
		fn(key, obj, deleted)
	})
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
	endpoints       *desired.Follower[*endpoint.EndpointRow]
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

// followsKubernetes: the engine reads the Kubernetes tables (unless
// policy is never enforced).
func (in *inputs) followsKubernetes() bool { return in.networkPolicies != nil }

// follow starts following the endpoints and, unless policy is never
// enforced, the Kubernetes tables. It returns what the engine's
// controller reads: those tables, whose first list the first write
// waits for (it then holds every endpoint's policy under every policy,
// and only then may the reconciler prune what an earlier run left).
func (a *Agent) follow() (*inputs, []desired.Input, error) {
	in := &inputs{sliceServices: map[string]string{}, namedPorts: namedPorts{}}
	var errs [9]error
	in.endpoints, errs[0] = desired.Follow(a.db, a.eps)
	if a.mode != policy.ModeNever {
		in.networkPolicies, errs[1] = newFollower(a.db, a.in.NetworkPolicies, true)
		in.cnps, errs[2] = newFollower(a.db, a.in.CNPs, true)
		in.ccnps, errs[3] = newFollower(a.db, a.in.CCNPs, true)
		in.identities, errs[4] = newFollower(a.db, a.in.CiliumIdentities, true)
		in.ciliumEndpoints, errs[5] = newFollower(a.db, a.in.CiliumEndpoints, true)
		// A change of these names no generation that says whether
		// translations read it (labels and addresses do not bump it).
		in.cidrGroups, errs[6] = newFollower(a.db, a.in.CIDRGroups, false)
		in.services, errs[7] = newFollower(a.db, a.in.Services, false)
		in.endpointSlices, errs[8] = newFollower(a.db, a.in.EndpointSlices, false)
	}
	if err := errors.Join(errs[:]...); err != nil {
		return nil, nil, err
	}
	inputs := desired.Inputs(in.endpoints)
	if in.followsKubernetes() {
		inputs = append(inputs, desired.Inputs(in.networkPolicies.f, in.cnps.f, in.ccnps.f, in.identities.f,
			in.ciliumEndpoints.f, in.cidrGroups.f, in.services.f, in.endpointSlices.f)...)
	}
	return in, inputs, nil
}

// apply gives the engine every change of its inputs up to txn.
func (a *Agent) apply(in *inputs, txn statedb.ReadTxn) {
	if in.followsKubernetes() {
		a.applyKubernetes(in, txn)
	}
	in.endpoints.Next(txn, func(e *endpoint.EndpointRow, deleted bool) {
		a.endpointChanged(txn, e, endpoint.Gone(e, deleted))
	})
}

// applyKubernetes gives the engine the changes of the Kubernetes tables.
// The Services and CIDR groups come first, so that the policies
// translated after them and those translated again read the same.
func (a *Agent) applyKubernetes(in *inputs, txn statedb.ReadTxn) {
	c := a.clusterAt(txn)
	a.translateDependents(c, a.touchedDependencies(in, txn))
	followPolicies(a, in.networkPolicies, txn, c, policy.KindNetworkPolicy, translateNetworkPolicy)
	followPolicies(a, in.cnps, txn, c, policy.KindCNP, policyk8s.TranslateCNP)
	followPolicies(a, in.ccnps, txn, c, policy.KindCCNP, policyk8s.TranslateCCNP)
	in.identities.next(txn, a.identityChanged)
	in.ciliumEndpoints.next(txn, func(key string, cep *v2.CiliumEndpoint, deleted bool) {
		for id, ports := range in.namedPorts.apply(key, cep, deleted) {
			a.engine.SetNamedPorts(id, ports)
		}
	})
}
