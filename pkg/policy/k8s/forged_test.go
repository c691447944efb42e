package k8s_test

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// A pod's own labels cannot claim what only its Namespace object says:
// a pod in namespace evil labelled as if its namespace were team=trusted
// is selected by no namespace-label selector of any policy kind, as peer
// or as subject, while a pod of the trusted namespace is. The identities
// are made the way the agent makes them, from the pod and namespace
// objects' labels.
func TestForgedNamespaceLabelSelectsNothing(t *testing.T) {
	identityOf := func(num identity.NumericIdentity, in labels.PodInput) *policy.Identity {
		return &policy.Identity{ID: num, Labels: labels.DefaultFilter().SecurityLabels(in)}
	}
	trusted := identityOf(300, labels.PodInput{PodLabels: map[string]string{"app": "web"}, Namespace: "trusted",
		NamespaceLabels: map[string]string{"team": "trusted", "kubernetes.io/metadata.name": "trusted"}, Cluster: "default"})
	forged := identityOf(301, labels.PodInput{
		PodLabels: map[string]string{"app": "web", "io.cilium.k8s.namespace.labels.team": "trusted",
			"io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name": "trusted",
			"io.cilium.k8s.policy.serviceaccount":                        "trusted-sa"},
		Namespace: "evil", NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "evil"},
		ServiceAccount: "default", Cluster: "default"})

	np := makeNP(npPolicyTypes(networkingv1.PolicyTypeIngress),
		npIngress([]networkingv1.NetworkPolicyPeer{namespaces(sel("team", "trusted"))}))
	npRules, err := policyk8s.FromNetworkPolicy(np)
	if err != nil {
		t.Fatal(err)
	}
	nsTeam := es("k8s:io.cilium.k8s.namespace.labels.team", "trusted")
	cnpRules, err := policyk8s.FromCNP(makeCNP(ingress(fromEndpoints(nsTeam))), policyk8s.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	ccnpRules, err := policyk8s.FromCCNP(makeCCNP(ingress(fromEndpoints(nsTeam))), policyk8s.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	// A service account selector, which a pod could forge the same way.
	saRules, err := policyk8s.FromCCNP(makeCCNP(ingress(fromEndpoints(
		es("k8s:io.cilium.k8s.policy.serviceaccount", "trusted-sa")))), policyk8s.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	// A clusterwide policy whose subject is the trusted namespace's pods.
	subject, err := policyk8s.FromCCNP(makeCCNP(func(r *api.Rule) { r.EndpointSelector = nsTeam },
		ingress(fromEndpoints(es()))), policyk8s.Cluster{})
	if err != nil {
		t.Fatal(err)
	}

	peers := func(rules []policy.Rule, id *policy.Identity) bool {
		for _, r := range rules {
			for _, p := range r.Peers {
				if p.Selects(id) {
					return true
				}
			}
		}
		return false
	}
	for _, c := range []struct {
		kind  string
		rules []policy.Rule
	}{{"NetworkPolicy namespaceSelector", npRules}, {"CiliumNetworkPolicy", cnpRules}, {"CiliumClusterwideNetworkPolicy", ccnpRules}} {
		if !peers(c.rules, trusted) {
			t.Errorf("%s: the trusted namespace's pod is not selected", c.kind)
		}
		if peers(c.rules, forged) {
			t.Errorf("%s: the pod of namespace evil that labelled itself team=trusted is selected (labels %v)", c.kind, forged.Labels.Strings())
		}
	}
	if peers(saRules, forged) {
		t.Errorf("a pod's own io.cilium.k8s.policy.serviceaccount label is selected (labels %v)", forged.Labels.Strings())
	}
	if len(subject) == 0 || !subject[0].Subject.Selects(trusted) || subject[0].Subject.Selects(forged) {
		t.Errorf("clusterwide subject by namespace labels: trusted selected %v, forged selected %v",
			len(subject) > 0 && subject[0].Subject.Selects(trusted), len(subject) > 0 && subject[0].Subject.Selects(forged))
	}
}
