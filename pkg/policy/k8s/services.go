package k8s

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// Services is what translating toServices reads of the cluster: the
// policy agent's view of the Services and EndpointSlices tables
// implements it.
type Services interface {
	// KubeService returns the Service namespace/name; false when there
	// is none.
	KubeService(namespace, name string) (*corev1.Service, bool)
	// KubeServices lists the Services of a namespace, of every namespace
	// for "".
	KubeServices(namespace string) []*corev1.Service
	// EndpointSlices lists the EndpointSlices of the Service
	// namespace/name.
	EndpointSlices(namespace, name string) []*discoveryv1.EndpointSlice
}

// serviceRefs are the Services a policy's toServices may name, known
// from the policy alone: which Service changes can change its rules.
type serviceRefs struct {
	// names are Services by name; namespace "" stands for every one.
	names map[serviceName]bool
	// namespaces are those whose Services a selector reads the labels
	// of; "" stands for every one.
	namespaces map[string]bool
}

type serviceName struct{ namespace, name string }

func (r *serviceRefs) addName(namespace, name string) {
	if r.names == nil {
		r.names = map[serviceName]bool{}
	}
	r.names[serviceName{namespace, name}] = true
}

func (r *serviceRefs) addNamespace(namespace string) {
	if r.namespaces == nil {
		r.namespaces = map[string]bool{}
	}
	r.namespaces[namespace] = true
}

// empty: the policy names no Service.
func (r serviceRefs) empty() bool { return len(r.names) == 0 && len(r.namespaces) == 0 }

// concerns reports whether a change of the Service namespace/name (or of
// its EndpointSlices) may change the rules.
func (r serviceRefs) concerns(namespace, name string) bool {
	return r.names[serviceName{namespace, name}] || r.names[serviceName{"", name}] ||
		r.namespaces[namespace] || r.namespaces[""]
}

// servicePeers are the peers of toServices: the backends of the Services
// they select, which exist now. A Service that does not exist selects
// nothing; the rule still names peers, so it allows nothing rather than
// everything.
func (t *ciliumTranslation) servicePeers(refs []api.Service) []policy.Selector {
	var svcs []*corev1.Service
	for _, ref := range refs {
		svcs = append(svcs, t.services(ref)...)
	}
	// Listed in the caches' order, which varies: sorted, the same
	// Services always make the same rules.
	slices.SortFunc(svcs, func(a, b *corev1.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	svcs = slices.CompactFunc(svcs, func(a, b *corev1.Service) bool {
		return a.Namespace == b.Namespace && a.Name == b.Name
	})
	var out []policy.Selector
	for _, svc := range svcs {
		out = append(out, t.backends(svc)...)
	}
	return out
}

// services are the Services that ref selects. An empty namespace is
// every namespace, in a namespaced policy too, as in Cilium (unlike
// endpoint peers, which a namespaced policy scopes to its namespace).
func (t *ciliumTranslation) services(ref api.Service) []*corev1.Service {
	switch {
	case ref.K8sService != nil && ref.K8sServiceSelector == nil:
		ns := ref.K8sService.Namespace
		name := ref.K8sService.ServiceName
		t.refs.services.addName(ns, name)
		if t.cluster.Services == nil {
			return nil
		}
		if ns != "" {
			if svc, ok := t.cluster.Services.KubeService(ns, name); ok {
				return []*corev1.Service{svc}
			}
			return nil
		}
		return slices.DeleteFunc(t.cluster.Services.KubeServices(""), func(s *corev1.Service) bool { return s.Name != name })
	case ref.K8sServiceSelector != nil && ref.K8sService == nil:
		ns := ref.K8sServiceSelector.Namespace
		t.refs.services.addNamespace(ns)
		if t.cluster.Services == nil {
			return nil
		}
		sel := &ref.K8sServiceSelector.Selector
		return slices.DeleteFunc(t.cluster.Services.KubeServices(ns), func(s *corev1.Service) bool {
			return !sel.Matches(serviceLabels(s))
		})
	}
	return nil // neither or both: Validate said so
}

// serviceLabels are a Service's labels as a selector reads them.
func serviceLabels(svc *corev1.Service) labels.Labels {
	ls := labels.Labels{}
	for k, v := range svc.Labels {
		ls.Add(labels.New(labels.SourceK8s, k, v))
	}
	return ls
}

// backends are a Service's backends as Cilium reads them: the pods its
// selector selects in its namespace; without a selector, the addresses
// of its EndpointSlices, as prefixes outside the cluster (toCIDR).
func (t *ciliumTranslation) backends(svc *corev1.Service) []policy.Selector {
	if len(svc.Spec.Selector) > 0 {
		sel := api.EndpointSelector{MatchLabels: maps.Clone(svc.Spec.Selector)}
		return []policy.Selector{policy.LabelSelector{Selector: sel, Namespace: svc.Namespace}}
	}
	var addrs []netip.Addr
	for _, es := range t.cluster.Services.EndpointSlices(svc.Namespace, svc.Name) {
		addrs = append(addrs, reachableAddrs(es)...)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	var out []policy.Selector
	for _, a := range slices.Compact(addrs) {
		out = append(out, policy.CIDRSelector{Prefix: netip.PrefixFrom(a, a.BitLen())})
	}
	return out
}

// reachableAddrs are the IPv4 addresses of a slice's endpoints that a
// connection may reach: ready, or still serving while terminating. A
// condition the slice leaves out counts as true, as the API says.
func reachableAddrs(es *discoveryv1.EndpointSlice) []netip.Addr {
	if es.AddressType != discoveryv1.AddressTypeIPv4 {
		return nil
	}
	var out []netip.Addr
	for _, ep := range es.Endpoints {
		c := ep.Conditions
		if !isTrue(c.Ready) && !isTrue(c.Serving) {
			continue
		}
		for _, s := range ep.Addresses {
			if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
				out = append(out, a)
			}
		}
	}
	return out
}

// isTrue reads a condition that counts as true when not given.
func isTrue(c *bool) bool { return c == nil || *c }
