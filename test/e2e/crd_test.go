package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/identity/allocator"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/labels"
)

// A policy as Cilium's documentation writes them (L3 from endpoints, L4 ports,
// CIDR sets with exceptions, entities, deny rules and port ranges).
const docsCNP = `apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: l3-l4-rule
  namespace: default
spec:
  description: "L3-L4 policy to restrict deathstar access to empire ships only"
  endpointSelector:
    matchLabels:
      org: empire
      class: deathstar
  ingress:
  - fromEndpoints:
    - matchLabels:
        org: empire
    toPorts:
    - ports:
      - port: "80"
        protocol: TCP
  - fromEntities: [host, remote-node]
  egress:
  - toCIDRSet:
    - cidr: 10.0.0.0/8
      except: [10.96.0.0/12]
  - toEntities: [kube-apiserver]
    toPorts:
    - ports:
      - port: "6443"
        endPort: 6450
        protocol: TCP
  ingressDeny:
  - fromCIDR: [192.168.0.0/16]
    toPorts:
    - ports: [{port: "22", protocol: ANY}]
specs:
- endpointSelector:
    matchExpressions:
    - {key: env, operator: In, values: [dev, test]}
  egressDeny:
  - toEndpoints:
    - matchLabels: {"k8s:io.kubernetes.pod.namespace": kube-system}
`

// TestPrivilegedSmokeCRDs applies the generated CRDs to a real API server, checks a
// Cilium policy round-trips unchanged (nothing pruned by the schemas), that
// the schemas reject invalid values, that every kind works through the typed
// client, and that two identity allocators racing on the real API server
// converge on one identity per label set.
func TestPrivilegedSmokeCRDs(t *testing.T) {
	lab := StartLab(t, "e2ecrd", "--nodes", "1", "--cni=bridge", "--kube-proxy=iptables")
	crdDir, err := filepath.Abs("../../install/kubernetes/crds")
	if err != nil {
		t.Fatal(err)
	}
	lab.Kubectl("apply", "--server-side", "-f", crdDir)
	for _, n := range []string{"ciliumnetworkpolicies", "ciliumclusterwidenetworkpolicies", "ciliumidentities",
		"ciliumendpoints", "ciliumnodes", "ciliumendpointslices"} {
		// Not `kubectl wait`: it fails instead of waiting while a CRD
		// just created has no conditions yet.
		lab.Eventually(n+" Established", time.Minute, func() error {
			out, err := lab.run("kubectl", "get", "crd", n+".cilium.io",
				"-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			if err != nil || strings.TrimSpace(out) != "True" {
				return fmt.Errorf("Established %q: %v", out, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
			}
			return nil
		})
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", lab.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("docs policy round-trips", func(t *testing.T) { testPolicyRoundTrip(t, lab, cs) })
	t.Run("schema rejects invalid values", func(t *testing.T) {
		bad := `{apiVersion: cilium.io/v2, kind: CiliumNetworkPolicy, metadata: {name: bad, namespace: default},
spec: {endpointSelector: {}, ingress: [{fromEntities: [everything]}]}}`
		f := filepath.Join(t.TempDir(), "bad.yaml")
		if err := writeFile(f, bad); err != nil {
			t.Fatal(err)
		}
		out, err := lab.run("kubectl", "apply", "-f", f)
		if err == nil {
			t.Fatalf("API server accepted an unknown entity: %s", out)
		}
		t.Logf("rejected as expected: %s", out)
	})
	t.Run("every kind through the typed client", func(t *testing.T) { testKinds(t, cs) })
	t.Run("identity allocation race", func(t *testing.T) { testIdentityRace(t, cfg) })
	t.Logf("objects left for the record:\n%s", lab.Kubectl("get", "cnp,ccnp,ciliumid,cep,cn,ces", "-A"))
}

func testPolicyRoundTrip(t *testing.T, lab *Lab, cs *client.Clientset) {
	lab.KubectlApply(docsCNP)
	var sent map[string]any
	if err := yaml.Unmarshal([]byte(docsCNP), &sent); err != nil {
		t.Fatal(err)
	}
	// Compare what the server stored with what was sent, as plain JSON: a
	// field our schema lacks would have been pruned and show up here.
	var stored map[string]any
	lab.KubectlJSON(&stored, "get", "cnp", "l3-l4-rule", "-n", "default")
	for _, k := range []string{"spec", "specs"} {
		if !reflect.DeepEqual(normJSON(t, sent[k]), normJSON(t, stored[k])) {
			t.Errorf("%s changed on the server:\n sent %s\n got  %s", k, normJSON(t, sent[k]), normJSON(t, stored[k]))
		}
	}
	cnp, err := cs.CiliumV2().CiliumNetworkPolicies("default").Get(t.Context(), "l3-l4-rule", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := cnp.Rules()
	if err != nil {
		t.Fatalf("stored policy does not validate: %v", err)
	}
	if len(rules) != 2 || rules[0].Egress[1].ToPorts[0].Ports[0].EndPort != 6450 {
		t.Fatalf("typed client decoded %+v", rules)
	}
	// Status is a subresource: writing it through UpdateStatus works.
	cnp.Status.Conditions = []v2.NetworkPolicyCondition{{Type: "Valid", Status: metav1.ConditionTrue}}
	if _, err := cs.CiliumV2().CiliumNetworkPolicies("default").UpdateStatus(t.Context(), cnp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func normJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x) // maps marshal with sorted keys
	return string(b)
}

func testKinds(t *testing.T, cs *client.Clientset) {
	ctx := t.Context()
	ccnp := &v2.CiliumClusterwideNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "host-fw"}}
	if err := yaml.Unmarshal([]byte(`{spec: {nodeSelector: {}, ingress: [{fromEntities: [cluster]}]}}`), ccnp); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CiliumV2().CiliumClusterwideNetworkPolicies().Create(ctx, ccnp, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ccnp: %v", err)
	}
	node := &v2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "e2e-node"}, Spec: v2.NodeSpec{
		Addresses: []v2.NodeAddress{{Type: v2.NodeInternalIP, IP: "10.0.0.1"}},
		IPAM:      v2.IPAMSpec{PodCIDRs: []string{"10.1.0.0/24"}},
	}}
	got, err := cs.CiliumV2().CiliumNodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil || !reflect.DeepEqual(got.Spec, node.Spec) {
		t.Fatalf("ciliumnode: %+v, %v", got, err)
	}
	cep := &v2.CiliumEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "pod-a", Namespace: "default"},
		Status: v2.EndpointStatus{ID: 12, Identity: &v2.EndpointIdentity{ID: 300, Labels: []string{"k8s:app=a"}},
			Networking: &v2.EndpointNetworking{Addressing: v2.AddressPairList{{IPV4: "10.1.0.7"}}, NodeIP: "10.0.0.1"}}}
	gotCEP, err := cs.CiliumV2().CiliumEndpoints("default").Create(ctx, cep, metav1.CreateOptions{})
	if err != nil || !reflect.DeepEqual(gotCEP.Status, cep.Status) {
		t.Fatalf("ciliumendpoint: %+v, %v", gotCEP, err)
	}
	ces := &v2alpha1.CiliumEndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "ces-1"}, Namespace: "default",
		Endpoints: []v2alpha1.CoreCiliumEndpoint{{Name: "pod-a", IdentityID: 300, Networking: cep.Status.Networking}}}
	gotCES, err := cs.CiliumV2alpha1().CiliumEndpointSlices().Create(ctx, ces, metav1.CreateOptions{})
	if err != nil || !reflect.DeepEqual(gotCES.Endpoints, ces.Endpoints) {
		t.Fatalf("ciliumendpointslice: %+v, %v", gotCES, err)
	}
}

// testIdentityRace runs two agents (separate clientsets and allocators), each
// with several goroutines, allocating the same label sets against the real API
// server, in a narrow range so label sets compete for numbers.
func testIdentityRace(t *testing.T, cfg *rest.Config) {
	const sets, workers = 12, 4
	allocCfg := allocator.AllocatorConfig{Min: 40000, Max: 40000 + 23}
	log := slog.New(slog.DiscardHandler)
	var agents []*allocator.Allocator
	for range 2 {
		cs, err := client.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a, err := allocator.NewAllocator(cs.CiliumV2().CiliumIdentities(), log, allocCfg)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	setLabels := func(i int) labels.Labels {
		return labels.DefaultFilter().SecurityLabels(labels.PodInput{
			PodLabels: map[string]string{"app": fmt.Sprint("race", i), "pod-template-hash": fmt.Sprint(i * 7)},
			Namespace: "default", ServiceAccount: "default",
		})
	}
	var mu sync.Mutex
	got := map[int]map[identity.NumericIdentity]bool{}
	var wg sync.WaitGroup
	for _, a := range agents {
		for w := range workers {
			wg.Go(func() {
				for i := range sets {
					set := (i + w*3) % sets
					id, _, err := a.Allocate(context.Background(), setLabels(set))
					if err != nil {
						t.Errorf("allocate set %d: %v", set, err)
						return
					}
					mu.Lock()
					if got[set] == nil {
						got[set] = map[identity.NumericIdentity]bool{}
					}
					got[set][id.ID] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	cs, err := client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for set, ids := range got {
		if len(ids) != 1 {
			t.Errorf("label set %d got identities %v", set, ids)
			continue
		}
		for id := range ids {
			obj, err := cs.CiliumV2().CiliumIdentities().Get(t.Context(), id.String(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := setLabels(set).SecurityLabels(); !reflect.DeepEqual(obj.SecurityLabels, want) {
				t.Errorf("CiliumIdentity %s: security-labels %v, want %v", id, obj.SecurityLabels, want)
			}
			back, err := agents[1].Lookup(t.Context(), id)
			if err != nil || !back.Labels.Equal(setLabels(set)) {
				t.Errorf("lookup %d: %v, %v", id, back, err)
			}
		}
	}
	list, err := cs.CiliumV2().CiliumIdentities().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != sets {
		t.Errorf("%d CiliumIdentity objects, want %d", len(list.Items), sets)
	}
}
