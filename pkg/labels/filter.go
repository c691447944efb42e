package labels

import (
	"fmt"
	"regexp"
	"strings"
)

// Prefix is one rule of a label filter: labels whose key matches Expr at its
// start (and whose source is Source, when set) are included, or ignored when
// Ignore is set.
type Prefix struct {
	Source string
	Expr   *regexp.Regexp
	Ignore bool
}

// ParsePrefix reads a filter rule: an optional "!" (ignore), an optional
// "source:" and a regular expression anchored at the start of the key.
func ParsePrefix(s string) (Prefix, error) {
	var p Prefix
	if rest, ok := strings.CutPrefix(s, "!"); ok {
		p.Ignore, s = true, rest
	}
	if src, rest, ok := strings.Cut(s, ":"); ok {
		p.Source, s = src, rest
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return Prefix{}, fmt.Errorf("label prefix %q: %w", s, err)
	}
	p.Expr = re
	return p, nil
}

// match returns whether p matches l and the length of the matched part of the
// key; longer matches win between include and ignore rules.
func (p Prefix) match(l Label) (bool, int) {
	if p.Source != "" && p.Source != l.Source {
		return false, 0
	}
	loc := p.Expr.FindStringIndex(l.Key)
	if loc == nil || loc[0] != 0 {
		return false, 0
	}
	return true, loc[1]
}

// Filter splits labels into the ones that define an identity and the ones that
// are only informational (they change per pod and would make every pod its own
// identity, or say nothing about security).
type Filter struct {
	prefixes []Prefix
}

// defaultPrefixes are the rules Cilium applies by default: keep reserved labels,
// the namespace, namespace labels, app.kubernetes.io, cluster and service
// account; drop the per-pod and per-revision labels Kubernetes controllers add.
var defaultPrefixes = []string{
	`reserved:.*`,
	regexp.QuoteMeta(KeyPodNamespace),
	regexp.QuoteMeta(strings.TrimSuffix(PrefixNamespaceLabels, ".")),
	regexp.QuoteMeta("app.kubernetes.io"),
	regexp.QuoteMeta(KeyCluster),
	regexp.QuoteMeta(KeyServiceAccount),
	`!io\.kubernetes`,
	`!kubernetes\.io`,
	`!statefulset\.kubernetes\.io/pod-name`,
	`!apps\.kubernetes\.io/pod-index`,
	`!batch\.kubernetes\.io/job-completion-index`,
	`!batch\.kubernetes\.io/controller-uid`,
	`!.*beta\.kubernetes\.io`,
	`!k8s\.io`,
	`!pod-template-generation`,
	`!pod-template-hash`,
	`!controller-revision-hash`,
	`!controller-uid`,
	`!annotation.*`,
	`!etcd_node`,
	`!topology\.kubernetes\.io`,
}

// DefaultFilter returns Cilium's default identity label filter.
func DefaultFilter() *Filter {
	f, err := NewFilter(defaultPrefixes)
	if err != nil {
		panic(err) // the defaults are constants; a bad one is a programming error
	}
	return f
}

// NewFilter builds a filter from rules in ParsePrefix form.
func NewFilter(rules []string) (*Filter, error) {
	f := &Filter{}
	for _, r := range rules {
		p, err := ParsePrefix(r)
		if err != nil {
			return nil, err
		}
		f.prefixes = append(f.prefixes, p)
	}
	return f, nil
}

// Split returns the identity-relevant labels of ls and the rest. A label is
// kept when no rule ignores it, or when an include rule matches a longer part of
// its key than the shortest matching ignore rule (so "!io.kubernetes" drops
// io.kubernetes.foo but "io.kubernetes.pod.namespace" keeps the namespace).
func (f *Filter) Split(ls Labels) (identity, info Labels) {
	identity, info = Labels{}, Labels{}
	for k, l := range ls {
		included, ignored := 0, 0
		for _, p := range f.prefixes {
			ok, n := p.match(l)
			if !ok {
				continue
			}
			if p.Ignore {
				if ignored == 0 || n < ignored {
					ignored = n
				}
			} else if n > included {
				included = n
			}
		}
		if ignored == 0 || included > ignored {
			identity[k] = l
		} else {
			info[k] = l
		}
	}
	return identity, info
}

// PodInput is what Kubernetes says about a pod that can bear on its identity.
type PodInput struct {
	PodLabels       map[string]string
	Namespace       string
	NamespaceLabels map[string]string
	ServiceAccount  string
	Cluster         string
}

// ForPod returns the full k8s-source label set of a pod the way Cilium builds it:
// pod labels, the namespace, each namespace label under
// io.cilium.k8s.namespace.labels., the service account and the cluster.
// Whoever may create a pod writes its labels, so none of them may speak for
// what only the Namespace object, the pod spec or the agent says: a pod's own
// label in the io.cilium.k8s. family or naming its namespace is left out
// (PodAsserts).
func ForPod(in PodInput) Labels {
	ls := Labels{}
	for k, v := range in.PodLabels {
		if PodAsserts(k) {
			ls.Add(New(SourceK8s, k, v))
		}
	}
	if in.Namespace != "" {
		ls.Add(New(SourceK8s, KeyPodNamespace, in.Namespace))
	}
	for k, v := range in.NamespaceLabels {
		ls.Add(New(SourceK8s, PrefixNamespaceLabels+k, v))
	}
	if in.ServiceAccount != "" {
		ls.Add(New(SourceK8s, KeyServiceAccount, in.ServiceAccount))
	}
	if in.Cluster != "" {
		ls.Add(New(SourceK8s, KeyCluster, in.Cluster))
	}
	return ls
}

// PodAsserts says whether a pod's own label with key k may go into its
// identity: not when k is in the io.cilium.k8s. family (namespace labels,
// service account, cluster, policy labels) or is the pod namespace's key.
// A pod in namespace evil labelled io.cilium.k8s.namespace.labels.team=trusted
// would otherwise be selected by a namespaceSelector {team: trusted}.
func PodAsserts(k string) bool {
	return k != KeyPodNamespace && !strings.HasPrefix(k, PrefixCilium)
}

// SecurityLabels returns the identity labels of a pod under filter f.
func (f *Filter) SecurityLabels(in PodInput) Labels {
	id, _ := f.Split(ForPod(in))
	return id
}
