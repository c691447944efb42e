package v2

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"
)

// A policy in the form Cilium's documentation writes them, with both spec and
// specs, decoded through a scheme as a client would.
const docsPolicy = `apiVersion: "cilium.io/v2"
kind: CiliumNetworkPolicy
metadata:
  name: "l3-l4-rule"
  namespace: default
spec:
  description: "Allow frontend to reach backend on 80/TCP"
  endpointSelector:
    matchLabels:
      role: backend
  ingress:
  - fromEndpoints:
    - matchLabels:
        role: frontend
    toPorts:
    - ports:
      - port: "80"
        protocol: TCP
specs:
- endpointSelector:
    matchLabels:
      role: backend
  egress:
  - toEntities: [kube-apiserver]
  - toServices:
    - k8sService:
        serviceName: myservice
        namespace: default
  egressDeny:
  - toCIDRSet:
    - cidr: 10.0.0.0/8
      except: [10.96.0.0/12]
`

func TestDecodeDocsPolicy(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := serializer.NewCodecFactory(s).UniversalDeserializer().Decode([]byte(docsPolicy), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gvk.Kind != CNPKindDefinition || gvk.Group != "cilium.io" || gvk.Version != "v2" {
		t.Fatalf("gvk %v", gvk)
	}
	cnp := obj.(*CiliumNetworkPolicy)
	rules, err := cnp.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 {
		t.Fatalf("%d rules", len(rules))
	}
	r := rules[0]
	if r.EndpointSelector.MatchLabels["role"] != "backend" ||
		r.Ingress[0].FromEndpoints[0].MatchLabels["role"] != "frontend" ||
		r.Ingress[0].ToPorts[0].Ports[0].Port != "80" || r.Ingress[0].ToPorts[0].Ports[0].Protocol != "TCP" {
		t.Fatalf("spec decoded wrong: %+v", r)
	}
	if rules[1].EgressDeny[0].ToCIDRSet[0].ExceptCIDRs[0] != "10.96.0.0/12" ||
		rules[1].Egress[1].ToServices[0].K8sService.ServiceName != "myservice" {
		t.Fatalf("specs decoded wrong: %+v", rules[1])
	}
	cp := cnp.DeepCopyObject().(*CiliumNetworkPolicy)
	cp.Spec.EndpointSelector.MatchLabels["role"] = "changed"
	if cnp.Spec.EndpointSelector.MatchLabels["role"] != "backend" {
		t.Fatal("DeepCopy shares the selector map")
	}
}

func TestPolicyRulesErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"empty", `{metadata: {name: x}}`, "neither spec nor specs"},
		{"bad spec", `{metadata: {name: x}, spec: {ingress: []}}`, "spec.endpointSelector"},
		{"bad specs", `{metadata: {name: x}, specs: [{endpointSelector: {}}, {endpointSelector: {}, egress: [{toEntities: [moon]}]}]}`,
			"specs[1].egress[0].toEntities[0]"},
		{"node selector in namespaced policy", `{metadata: {name: x}, spec: {nodeSelector: {}}}`, "spec.nodeSelector: Forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cnp CiliumNetworkPolicy
			if err := yaml.Unmarshal([]byte(tt.yaml), &cnp); err != nil {
				t.Fatal(err)
			}
			_, err := cnp.Rules()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	var ccnp CiliumClusterwideNetworkPolicy
	if err := yaml.Unmarshal([]byte(`{metadata: {name: x}, spec: {nodeSelector: {}}}`), &ccnp); err != nil {
		t.Fatal(err)
	}
	if _, err := ccnp.Rules(); err != nil {
		t.Fatalf("clusterwide node policy: %v", err)
	}
}

func TestIdentityAndNodeFieldNames(t *testing.T) {
	id := CiliumIdentity{SecurityLabels: map[string]string{"k8s:app": "web"}}
	b, _ := yaml.Marshal(id)
	if !strings.Contains(string(b), "security-labels:") {
		t.Fatalf("identity YAML: %s", b)
	}
	var n CiliumNode
	in := `{metadata: {name: n1}, spec: {addresses: [{type: InternalIP, ip: 10.0.0.1}], ipam: {podCIDRs: [10.1.0.0/24]}, health: {ipv4: 10.1.0.5}}}`
	if err := yaml.UnmarshalStrict([]byte(in), &n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.IPAM.PodCIDRs[0] != "10.1.0.0/24" || n.Spec.HealthAddressing.IPv4 != "10.1.0.5" {
		t.Fatalf("node: %+v", n.Spec)
	}
}

// A pool as Cilium's LB-IPAM documentation writes them, decoded through a
// scheme as a client would: every field lands, none is left over.
const docsPool = `apiVersion: "cilium.io/v2"
kind: CiliumLoadBalancerIPPool
metadata:
  name: "blue-pool"
spec:
  blocks:
  - cidr: "20.0.10.0/24"
  - start: "20.0.20.100"
    stop: "20.0.20.200"
  - start: "1.2.3.4"
  serviceSelector:
    matchExpressions:
      - {key: color, operator: In, values: [blue, cyan]}
  allowFirstLastIPs: "No"
  disabled: true
`

func TestDecodeDocsPool(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer().Decode([]byte(docsPool), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gvk.Kind != PoolKindDefinition || gvk.Version != Version {
		t.Fatalf("gvk %v", gvk)
	}
	p := obj.(*CiliumLoadBalancerIPPool).Spec
	if len(p.Blocks) != 3 || p.Blocks[0].Cidr != "20.0.10.0/24" || p.Blocks[1].Start != "20.0.20.100" ||
		p.Blocks[1].Stop != "20.0.20.200" || p.Blocks[2].Start != "1.2.3.4" || p.Blocks[2].Stop != "" ||
		p.AllowFirstLastIPs != AllowFirstLastIPNo || !p.Disabled ||
		p.ServiceSelector == nil || p.ServiceSelector.MatchExpressions[0].Values[1] != "cyan" {
		t.Fatalf("decoded wrong: %+v", p)
	}
}
