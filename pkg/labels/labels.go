// Package labels holds Cilium's label model: a label is a key and value with a
// source (k8s, reserved, cni, ...), and a set of labels is what an identity is
// derived from. The string forms ("k8s:app=web") match Cilium's so policies and
// CiliumIdentity objects written by Cilium read the same here.
package labels

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Label sources. A label's source says who asserted it; policies may select on
// a specific source or on any.
const (
	SourceK8s       = "k8s"
	SourceReserved  = "reserved"
	SourceCNI       = "cni"
	SourceContainer = "container"
	SourceUnspec    = "unspec"
	SourceAny       = "any"
	SourceCIDR      = "cidr"
)

// Well-known label keys that Cilium derives from Kubernetes objects.
const (
	// PrefixCilium starts every label key that Cilium derives from a trusted
	// source (the Namespace object, the pod spec, the agent's
	// configuration, a policy): a pod's own labels never carry one.
	PrefixCilium = "io.cilium.k8s."
	// KeyPodNamespace carries the pod's namespace.
	KeyPodNamespace = "io.kubernetes.pod.namespace"
	// PrefixNamespaceLabels prefixes each label of the pod's namespace.
	PrefixNamespaceLabels = "io.cilium.k8s.namespace.labels."
	// KeyServiceAccount carries the pod's service account.
	KeyServiceAccount = "io.cilium.k8s.policy.serviceaccount"
	// KeyCluster carries the name of the cluster the pod runs in.
	KeyCluster = "io.cilium.k8s.policy.cluster"
)

// Label is one label. Its JSON form is Cilium's (used in policy rule labels).
type Label struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Source string `json:"source"`
}

// New returns a label.
func New(source, key, value string) Label {
	return Label{Key: key, Value: value, Source: source}
}

// Parse reads "source:key=value", "source:key", "key=value" or "key"; a missing
// source is unspec. A key that itself contains ':' before any '=' keeps the
// part before the first ':' as the source, as Cilium does.
func Parse(s string) Label {
	src := SourceUnspec
	if i := strings.IndexByte(s, ':'); i >= 0 {
		if eq := strings.IndexByte(s, '='); eq < 0 || i < eq {
			src, s = s[:i], s[i+1:]
		}
	}
	key, value, _ := strings.Cut(s, "=")
	if src == "" {
		src = SourceUnspec
	}
	return Label{Key: key, Value: value, Source: src}
}

// String returns "source:key=value" ("source:key" when the value is empty).
func (l Label) String() string {
	if l.Value == "" {
		return l.Source + ":" + l.Key
	}
	return l.Source + ":" + l.Key + "=" + l.Value
}

// SourceKey is "source:key", the key of a label in a CiliumIdentity's
// security-labels map.
func (l Label) SourceKey() string { return l.Source + ":" + l.Key }

// Labels is a set of labels keyed by label key: one value per key, whatever its
// source.
type Labels map[string]Label

// FromMap builds labels of one source from a Kubernetes label map.
func FromMap(source string, m map[string]string) Labels {
	out := make(Labels, len(m))
	for k, v := range m {
		out[k] = Label{Key: k, Value: v, Source: source}
	}
	return out
}

// FromStrings parses each string with Parse.
func FromStrings(ss ...string) Labels {
	out := make(Labels, len(ss))
	for _, s := range ss {
		l := Parse(s)
		out[l.Key] = l
	}
	return out
}

// FromSecurityLabels reads the security-labels map of a CiliumIdentity
// ("source:key" -> value).
func FromSecurityLabels(m map[string]string) Labels {
	out := make(Labels, len(m))
	for sk, v := range m {
		l := Parse(sk)
		l.Value = v
		out[l.Key] = l
	}
	return out
}

// FromClusterIdentity reads the security-labels of a CiliumIdentity for
// selecting it: without the labels of the sources only the agent itself
// assigns. Reserved identities (the host, the world, ...) and CIDR
// identities are never CiliumIdentity objects, so whoever wrote one that
// names reserved:host or a cidr: label must not pass for them.
func FromClusterIdentity(m map[string]string) Labels {
	out := FromSecurityLabels(m)
	for k, l := range out {
		if l.Source == SourceReserved || l.Source == SourceCIDR {
			delete(out, k)
		}
	}
	return out
}

// Add inserts l, replacing a label with the same key.
func (ls Labels) Add(l Label) { ls[l.Key] = l }

// Merge returns a copy of ls with every label of other added.
func (ls Labels) Merge(other Labels) Labels {
	out := maps.Clone(ls)
	if out == nil {
		out = Labels{}
	}
	maps.Copy(out, other)
	return out
}

// Has reports whether ls holds l (same key, value and source).
func (ls Labels) Has(l Label) bool {
	got, ok := ls[l.Key]
	return ok && got == l
}

// Sorted returns the labels ordered by their string form.
func (ls Labels) Sorted() []Label {
	out := slices.Collect(maps.Values(ls))
	slices.SortFunc(out, func(a, b Label) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Strings returns the sorted string forms.
func (ls Labels) Strings() []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls.Sorted() {
		out = append(out, l.String())
	}
	return out
}

// Key is the canonical form of the set: equal sets, equal keys. Identities are
// allocated per key.
func (ls Labels) Key() string {
	return strings.Join(ls.Strings(), ";")
}

// String is the same as Key, for logs.
func (ls Labels) String() string { return ls.Key() }

// SecurityLabels returns the "source:key" -> value map stored in a
// CiliumIdentity.
func (ls Labels) SecurityLabels() map[string]string {
	out := make(map[string]string, len(ls))
	for _, l := range ls {
		out[l.SourceKey()] = l.Value
	}
	return out
}

// K8sMap returns the labels as a plain Kubernetes label map, dropping sources.
func (ls Labels) K8sMap() map[string]string {
	out := make(map[string]string, len(ls))
	for k, l := range ls {
		out[k] = l.Value
	}
	return out
}

// Equal reports whether both sets hold the same labels.
func (ls Labels) Equal(other Labels) bool {
	return maps.Equal(ls, other)
}

// Reserved returns the single reserved label for name ("reserved:host").
func Reserved(name string) Labels {
	return Labels{name: Label{Key: name, Source: SourceReserved}}
}

// ReservedName returns the name of the reserved label in ls, if ls is exactly
// one reserved label.
func (ls Labels) ReservedName() (string, bool) {
	if len(ls) != 1 {
		return "", false
	}
	for _, l := range ls {
		if l.Source == SourceReserved {
			return l.Key, true
		}
	}
	return "", false
}

// Validate checks that every label has a key and that map keys match.
func (ls Labels) Validate() error {
	for k, l := range ls {
		if l.Key == "" {
			return fmt.Errorf("label %q: empty key", l.String())
		}
		if k != l.Key {
			return fmt.Errorf("label %q stored under key %q", l.String(), k)
		}
	}
	return nil
}
