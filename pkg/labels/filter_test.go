package labels

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Label
	}{
		{"k8s:app=web", Label{Key: "app", Value: "web", Source: SourceK8s}},
		{"reserved:host", Label{Key: "host", Source: SourceReserved}},
		{"app=web", Label{Key: "app", Value: "web", Source: SourceUnspec}},
		{"k8s:io.kubernetes.pod.namespace=default", Label{Key: KeyPodNamespace, Value: "default", Source: SourceK8s}},
		{"app=a:b", Label{Key: "app", Value: "a:b", Source: SourceUnspec}},
	}
	for _, tt := range tests {
		if got := Parse(tt.in); got != tt.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestKeyIsCanonical(t *testing.T) {
	a := FromStrings("k8s:b=2", "k8s:a=1")
	b := FromStrings("k8s:a=1", "k8s:b=2")
	if a.Key() != b.Key() || a.Key() != "k8s:a=1;k8s:b=2" {
		t.Fatalf("keys differ: %q vs %q", a.Key(), b.Key())
	}
	back := FromSecurityLabels(a.SecurityLabels())
	if !back.Equal(a) {
		t.Fatalf("security labels round trip: %v != %v", back, a)
	}
}

func TestSecurityLabels(t *testing.T) {
	f := DefaultFilter()
	tests := []struct {
		name string
		in   PodInput
		want []string
	}{
		{
			name: "deployment pod drops per-revision labels",
			in: PodInput{
				PodLabels: map[string]string{"app": "web", "pod-template-hash": "5d9f7c", "tier": "front"},
				Namespace: "shop", ServiceAccount: "web-sa",
			},
			want: []string{"k8s:app=web", "k8s:io.cilium.k8s.policy.serviceaccount=web-sa",
				"k8s:io.kubernetes.pod.namespace=shop", "k8s:tier=front"},
		},
		{
			name: "statefulset and daemonset labels",
			in: PodInput{
				PodLabels: map[string]string{
					"app": "db", "controller-revision-hash": "db-7b", "statefulset.kubernetes.io/pod-name": "db-0",
					"apps.kubernetes.io/pod-index": "0", "pod-template-generation": "3",
				},
				Namespace: "data",
			},
			want: []string{"k8s:app=db", "k8s:io.kubernetes.pod.namespace=data"},
		},
		{
			name: "namespace labels are prefixed and kept; kubernetes.io ones in pods dropped",
			in: PodInput{
				PodLabels:       map[string]string{"run": "x", "kubernetes.io/foo": "bar", "topology.kubernetes.io/zone": "a", "k8s.io/x": "y"},
				Namespace:       "team",
				NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "team", "env": "prod"},
				Cluster:         "c1",
			},
			want: []string{
				"k8s:io.cilium.k8s.namespace.labels.env=prod",
				"k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=team",
				"k8s:io.cilium.k8s.policy.cluster=c1", "k8s:io.kubernetes.pod.namespace=team", "k8s:run=x",
			},
		},
		{
			name: "app.kubernetes.io kept, other io.kubernetes and beta labels dropped",
			in: PodInput{
				PodLabels: map[string]string{"app.kubernetes.io/name": "api", "io.kubernetes.container.name": "c",
					"beta.kubernetes.io/arch": "amd64", "batch.kubernetes.io/controller-uid": "u", "controller-uid": "u",
					"annotation.foo": "x", "etcd_node": "n"},
				Namespace: "default",
			},
			want: []string{"k8s:app.kubernetes.io/name=api", "k8s:io.kubernetes.pod.namespace=default"},
		},
		{
			name: "pod cannot fake its namespace",
			in:   PodInput{PodLabels: map[string]string{KeyPodNamespace: "kube-system"}, Namespace: "evil"},
			want: []string{"k8s:io.kubernetes.pod.namespace=evil"},
		},
		{
			name: "pod cannot fake namespace labels, service account or cluster",
			in: PodInput{
				PodLabels: map[string]string{"app": "x", "io.cilium.k8s.namespace.labels.team": "trusted",
					KeyServiceAccount: "admin", KeyCluster: "other", "io.cilium.k8s.policy.name": "p"},
				Namespace: "evil", NamespaceLabels: map[string]string{"team": "untrusted"},
			},
			want: []string{"k8s:app=x", "k8s:io.cilium.k8s.namespace.labels.team=untrusted",
				"k8s:io.kubernetes.pod.namespace=evil"},
		},
		{
			name: "a forged namespace label goes even when the namespace has no such label",
			in: PodInput{PodLabels: map[string]string{"io.cilium.k8s.namespace.labels.team": "trusted"},
				Namespace: "evil", ServiceAccount: "default", Cluster: "c1"},
			want: []string{"k8s:io.cilium.k8s.policy.cluster=c1", "k8s:io.cilium.k8s.policy.serviceaccount=default",
				"k8s:io.kubernetes.pod.namespace=evil"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := f.SecurityLabels(tt.in).Strings()
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestFilterKeepsReserved(t *testing.T) {
	id, info := DefaultFilter().Split(FromStrings("reserved:host", "k8s:pod-template-hash=1"))
	if !id.Has(New(SourceReserved, "host", "")) || len(id) != 1 || len(info) != 1 {
		t.Fatalf("identity %v, info %v", id, info)
	}
}

func TestCustomFilter(t *testing.T) {
	// With an include rule for app only, the longer include wins over a
	// shorter ignore of the same key.
	f, err := NewFilter([]string{"!ap", "app"})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := f.Split(FromStrings("k8s:app=x", "k8s:apex=y"))
	if got := id.Strings(); !slices.Equal(got, []string{"k8s:app=x"}) {
		t.Fatalf("got %q", got)
	}
	if _, err := NewFilter([]string{"("}); err == nil {
		t.Fatal("bad regexp accepted")
	}
}

// A CiliumIdentity that names a reserved or CIDR label (only an
// attacker with write access to CiliumIdentities could make one) is read
// without it, so that no selector of the host or the world selects it.
func TestFromClusterIdentityDropsAgentSources(t *testing.T) {
	got := FromClusterIdentity(map[string]string{"reserved:host": "", "cidr:0.0.0.0/0": "", "k8s:app": "web",
		"k8s:io.kubernetes.pod.namespace": "x"}).Strings()
	if want := []string{"k8s:app=web", "k8s:io.kubernetes.pod.namespace=x"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
