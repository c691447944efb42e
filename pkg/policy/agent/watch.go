package agent

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// watch follows the tables of policies, identities and CiliumEndpoints,
// feeding the engine, and waits until they hold everything. The Services that
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
	rep := policyk8s.NewReporter(ctx, a.log, a.clients, a.watchers.NodeName)
	a.rep = rep
	var synced []cache.InformerSynced
	follow := func(ch <-chan struct{}, err error) error {
		synced = append(synced, closed(ch))
		return err
	}
	err := errors.Join(
		follow(tables.Follow(ctx, db, t.NetworkPolicies, a.policyHandler(ctx, rep, policy.KindNetworkPolicy,
			func(obj any, _ policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error) {
				rules, err := policyk8s.FromNetworkPolicy(obj.(*networkingv1.NetworkPolicy))
				return rules, policyk8s.Dependencies{}, err
			}))),
		follow(tables.Follow(ctx, db, t.CNPs, a.policyHandler(ctx, rep, policy.KindCNP,
			func(obj any, c policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error) {
				return policyk8s.TranslateCNP(obj.(*v2.CiliumNetworkPolicy), c)
			}))),
		follow(tables.Follow(ctx, db, t.CCNPs, a.policyHandler(ctx, rep, policy.KindCCNP,
			func(obj any, c policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error) {
				return policyk8s.TranslateCCNP(obj.(*v2.CiliumClusterwideNetworkPolicy), c)
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
type translateFunc func(obj any, c policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error)

// policyHandler turns a policy object into rules for the engine. An
// object that does not translate is reported (an event, and the Valid
// condition of Cilium's policies) and its previous rules stay in force:
// bad input never half-applies.
func (a *Agent) policyHandler(ctx context.Context, rep *policyk8s.Reporter, kind string, translate translateFunc) cache.ResourceEventHandler {
	set := func(obj any) {
		meta, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		origin := policy.Origin{Kind: kind, Namespace: meta.GetNamespace(), Name: meta.GetName()}
		rs, refs, err := translate(obj, a.cluster)
		if err != nil {
			a.log.Warn("policy refused, its previous rules stay in force", "policy", origin.String(), "error", err)
		}
		if !policyk8s.Reported(obj, err) {
			rep.Report(kind, meta, err)
		}
		if err != nil {
			return
		}
		if refs.Empty() {
			a.do(func(e *policy.Engine) {
				delete(a.depPolicies, origin)
				a.setRules(e, origin, rs)
			})
			return
		}
		sp := &dependentPolicy{translate: func(c policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error) { return translate(obj, c) }, refs: refs}
		a.do(func(e *policy.Engine) {
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
			origin := policy.Origin{Kind: kind, Namespace: ns, Name: name}
			a.do(func(e *policy.Engine) {
				delete(a.depPolicies, origin)
				a.setRules(e, origin, nil)
			})
		},
	}
}

// dependentPolicy is a Cilium policy that names Services or CIDR
// groups: translate translates its object.
type dependentPolicy struct {
	translate func(c policyk8s.Cluster) ([]policy.Rule, policyk8s.Dependencies, error)
	refs      policyk8s.Dependencies
}

// serviceChanged queues the translation, again, of the policies that may
// name the Service n, whose object or EndpointSlices changed.
func (a *Agent) serviceChanged(n loadbalancer.ServiceName) {
	if _, hostPort := n.HostPortPod(); hostPort {
		return
	}
	a.do(func(e *policy.Engine) {
		for origin, sp := range a.depPolicies {
			if sp.refs.ConcernsService(n.Namespace, n.Name) {
				a.translateAgain(e, origin, sp)
			}
		}
	})
}

// translateAgain translates a policy with the Services and CIDR groups
// as they are now; the engine changes only if the rules did.
func (a *Agent) translateAgain(e *policy.Engine, origin policy.Origin, sp *dependentPolicy) {
	rs, _, err := sp.translate(a.cluster)
	if err != nil {
		// The same object translated before; only Services or groups
		// changed, and they are no error.
		a.log.Error("policy no longer translates, its previous rules stay in force", "policy", origin.String(), "error", err)
		return
	}
	if !policy.SameRules(e.RulesOf(origin), rs) {
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
		id := &policy.Identity{ID: num, Labels: labels.FromClusterIdentity(ci.SecurityLabels)}
		a.do(func(e *policy.Engine) { e.UpsertIdentity(id) })
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
				a.do(func(e *policy.Engine) { e.DeleteIdentity(num) })
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
		ports policy.NamedPorts
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
			var union policy.NamedPorts
			for _, p := range byCEP {
				if p.id == id {
					union = append(union, p.ports...)
				}
			}
			slices.SortFunc(union, compareNamedPorts)
			union = slices.Compact(union)
			a.do(func(e *policy.Engine) { e.SetNamedPorts(id, union) })
		}
	}
	set := func(obj any) {
		cep, ok := obj.(*v2.CiliumEndpoint)
		if !ok || cep.Status.Identity == nil {
			return
		}
		key := cep.Namespace + "/" + cep.Name
		update(key, &published{id: identity.NumericIdentity(cep.Status.Identity.ID), ports: policyk8s.NamedPorts(cep.Status.NamedPorts)})
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

func compareNamedPorts(x, y policy.NamedPort) int {
	return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Protocol, y.Protocol), cmp.Compare(x.Port, y.Port))
}

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
