package agent

import (
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/ciliumendpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// translateNetworkPolicy translates a NetworkPolicy, which names neither
// Services nor CIDR groups.
func translateNetworkPolicy(np *networkingv1.NetworkPolicy, _ policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error) {
	rules, err := policyk8s.FromNetworkPolicy(np)
	return rules, policyk8s.Dependencies{}, err
}

// followPolicies gives the engine the changes of one kind's policies.
func followPolicies[T tables.Object](a *Agent, f *follower[T], txn statedb.ReadTxn, c policyk8s.Cluster,
	kind string, translate func(T, policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error)) {
	f.next(txn, func(_ string, obj T, deleted bool) {
		origin := policy.Origin{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if deleted {
			delete(a.depPolicies, origin)
			a.setRules(a.engine, origin, nil)
			return
		}
		a.setPolicy(origin, obj, c, func(c policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error) {
			return translate(obj, c)
		})
	})
}

// setPolicy turns a policy object into rules for the engine. An object
// that does not translate is reported (an event, and the Valid condition
// of Cilium's policies) and its previous rules stay in force: bad input
// never half-applies.
func (a *Agent) setPolicy(origin policy.Origin, obj tables.Object, c policyk8s.Cluster,
	translate func(policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error)) {
	rs, refs, err := translate(c)
	if err != nil {
		a.log.Warn("policy refused, its previous rules stay in force", "policy", origin.String(), "error", err)
	}
	if a.rep != nil && !policyk8s.Reported(obj, err) {
		a.rep.Report(origin.Kind, obj, err)
	}
	if err != nil {
		return
	}
	if refs.Empty() {
		delete(a.depPolicies, origin)
		a.setRules(a.engine, origin, rs)
		return
	}
	a.depPolicies[origin] = &dependentPolicy{translate: translate, refs: refs}
	if !policy.SameRules(a.engine.RulesOf(origin), rs) {
		a.setRules(a.engine, origin, rs)
	}
}

// dependentPolicy is a Cilium policy that names Services or CIDR
// groups: translate translates its object.
type dependentPolicy struct {
	translate func(c policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error)
	refs      policyk8s.Dependencies
}

// touched are the Services (namespace/name) and CIDR groups whose
// objects changed.
type touched struct {
	services map[serviceKey]bool
	groups   map[string]bool
}

type serviceKey struct{ namespace, name string }

// concerns reports whether a policy that depends on refs may translate
// differently after the changes of t.
func (t touched) concerns(refs policyk8s.Dependencies) bool {
	for s := range t.services {
		if refs.ConcernsService(s.namespace, s.name) {
			return true
		}
	}
	for g := range t.groups {
		if refs.ConcernsCIDRGroup(g) {
			return true
		}
	}
	return false
}

// touchedDependencies reads the changes of CIDR groups, Services and
// EndpointSlices up to txn, and says which groups and Services they
// touch. A slice touches the Service it names and the one it named
// before, which the slice's key remembers.
func (a *Agent) touchedDependencies(in *inputs, txn statedb.ReadTxn) touched {
	t := touched{services: map[serviceKey]bool{}, groups: map[string]bool{}}
	in.cidrGroups.next(txn, func(key string, _ *v2.CiliumCIDRGroup, _ bool) { t.groups[key] = true })
	in.services.next(txn, func(_ string, svc *corev1.Service, _ bool) {
		t.services[serviceKey{svc.Namespace, svc.Name}] = true
	})
	in.endpointSlices.next(txn, func(key string, es *discoveryv1.EndpointSlice, deleted bool) {
		for _, name := range in.sliceMoved(key, es, deleted) {
			t.services[serviceKey{es.Namespace, name}] = true
		}
	})
	return t
}

// sliceMoved records the Service a slice names now and returns those a
// change of it touches: the one it named before and the one it names now.
func (in *inputs) sliceMoved(key string, es *discoveryv1.EndpointSlice, deleted bool) []string {
	before := in.sliceServices[key]
	now := ""
	if !deleted {
		now = es.Labels[discoveryv1.LabelServiceName]
	}
	if now == "" {
		delete(in.sliceServices, key)
	} else {
		in.sliceServices[key] = now
	}
	var out []string
	if before != "" {
		out = append(out, before)
	}
	if now != "" && now != before {
		out = append(out, now)
	}
	return out
}

// translateDependents translates again the policies that a change of
// Services or CIDR groups may concern.
func (a *Agent) translateDependents(c policyk8s.Cluster, t touched) {
	if len(t.services) == 0 && len(t.groups) == 0 {
		return
	}
	for origin, dp := range a.depPolicies {
		if t.concerns(dp.refs) {
			a.translateAgain(origin, dp, c)
		}
	}
}

// translateAgain translates a policy with the Services and CIDR groups
// of c; the engine changes only if the rules did.
func (a *Agent) translateAgain(origin policy.Origin, dp *dependentPolicy, c policyk8s.Cluster) {
	rs, _, err := dp.translate(c)
	if err != nil {
		// The same object translated before; only Services or groups
		// changed, and they are no error.
		a.log.Error("policy no longer translates, its previous rules stay in force", "policy", origin.String(), "error", err)
		return
	}
	if !policy.SameRules(a.engine.RulesOf(origin), rs) {
		a.setRules(a.engine, origin, rs)
	}
}

// identityChanged gives the engine a cluster identity, or takes it
// back.
func (a *Agent) identityChanged(key string, ci *v2.CiliumIdentity, deleted bool) {
	num, err := identity.ParseNumeric(key)
	if err != nil {
		return
	}
	switch {
	case deleted:
		a.engine.DeleteIdentity(num)
	case num.IsCluster():
		a.engine.UpsertIdentity(&policy.Identity{ID: num, Labels: labels.FromClusterIdentity(ci.SecurityLabels)})
	}
}

// endpointChanged gives the engine a local endpoint, with the named
// ports of its pod, or takes it back.
func (a *Agent) endpointChanged(txn statedb.ReadTxn, d *endpoint.EndpointRow, deleted bool) {
	if deleted {
		a.engine.DeleteEndpoint(d.ID)
		return
	}
	var ports policy.NamedPorts
	if pod, ok := tables.Get(txn, a.in.Pods, d.PodNamespace+"/"+d.PodName); ok {
		ports = policyk8s.NamedPorts(ciliumendpoint.NamedPorts(pod))
	}
	a.engine.UpsertEndpoint(policy.EndpointInfo{ID: d.ID, Identity: d.Identity, NamedPorts: ports})
}
