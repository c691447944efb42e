package k8s

import (
	"cmp"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// CIDRGroups is what translating cidrGroupRef and cidrGroupSelector
// reads of the cluster: the agent's cache of CiliumCIDRGroups implements
// it.
type CIDRGroups interface {
	// CIDRGroup returns the group named name; false when there is none.
	CIDRGroup(name string) (*v2.CiliumCIDRGroup, bool)
	// ListCIDRGroups lists every group.
	ListCIDRGroups() []*v2.CiliumCIDRGroup
}

// groupRefs are the CIDR groups a policy's CIDR rules name, known from
// the policy alone: which group changes can change its rules.
type groupRefs struct {
	names map[string]bool
	// any: a selector reads every group's labels.
	any bool
}

func (r *groupRefs) addName(name string) {
	if r.names == nil {
		r.names = map[string]bool{}
	}
	r.names[name] = true
}

func (r groupRefs) empty() bool { return len(r.names) == 0 && !r.any }

// concerns reports whether a change of the group name (its creation,
// update or deletion) may change the rules.
func (r groupRefs) concerns(name string) bool { return r.any || r.names[name] }

// cidrGroupPeers are the peers of a CIDR rule that names groups: one
// CIDR selector per prefix of the groups that exist now, less the rule's
// excepts, as toCIDRSet selects them. A group that does not exist (yet)
// selects nothing; the rule still names peers, so it allows nothing
// rather than everything. Prefixes a group cannot hold (the API server
// checks only their length) and IPv6 ones select nothing either.
func (t *ciliumTranslation) cidrGroupPeers(r *api.CIDRRule, path *field.Path) []policy.Selector {
	var excepts []netip.Prefix
	for i, ex := range r.ExceptCIDRs {
		e, err := api.ParseCIDR(ex)
		if err != nil {
			t.fail(field.Invalid(path.Child("except").Index(i), string(ex), err.Error()))
			continue
		}
		excepts = append(excepts, e)
	}
	var prefixes []netip.Prefix
	for _, g := range t.cidrGroups(r) {
		for _, c := range g.Spec.ExternalCIDRs {
			if p, err := api.ParseCIDR(c); err == nil && p.Addr().Is4() {
				prefixes = append(prefixes, p)
			}
		}
	}
	// Groups are listed in the cache's order, which varies: sorted, the
	// same groups always make the same rules.
	slices.SortFunc(prefixes, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	var out []policy.Selector
	for _, p := range slices.Compact(prefixes) {
		sel := policy.CIDRSelector{Prefix: p}
		excluded := false
		for _, e := range excepts {
			switch {
			case contains(e, p):
				excluded = true
			case contains(p, e):
				sel.Except = append(sel.Except, e)
			}
		}
		if !excluded {
			out = append(out, sel)
		}
	}
	return out
}

// cidrGroups are the groups a rule names, recording them in t.groupRefs.
func (t *ciliumTranslation) cidrGroups(r *api.CIDRRule) []*v2.CiliumCIDRGroup {
	switch {
	case r.CIDRGroupRef != "":
		t.refs.groups.addName(r.CIDRGroupRef)
		if t.cluster.CIDRGroups == nil {
			return nil
		}
		if g, ok := t.cluster.CIDRGroups.CIDRGroup(r.CIDRGroupRef); ok {
			return []*v2.CiliumCIDRGroup{g}
		}
	case r.CIDRGroupSelector != nil:
		t.refs.groups.any = true
		if t.cluster.CIDRGroups == nil {
			return nil
		}
		return slices.DeleteFunc(t.cluster.CIDRGroups.ListCIDRGroups(), func(g *v2.CiliumCIDRGroup) bool {
			return !r.CIDRGroupSelector.Matches(cidrGroupLabels(g))
		})
	}
	return nil
}

// cidrGroupLabels are a group's labels as a cidrGroupSelector reads them.
func cidrGroupLabels(g *v2.CiliumCIDRGroup) labels.Labels {
	ls := labels.Labels{}
	for k, v := range g.Labels {
		ls.Add(labels.New(labels.SourceK8s, k, v))
	}
	return ls
}

// contains reports whether every address of q is in p.
func contains(p, q netip.Prefix) bool {
	return p.Bits() <= q.Bits() && p.Contains(q.Addr())
}
