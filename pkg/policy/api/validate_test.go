package api

import (
	"strings"
	"testing"
)

func TestDecodeRuleValid(t *testing.T) {
	// The shapes of the examples in Cilium's policy documentation.
	docs := map[string]string{
		"l3 endpoints": `
endpointSelector: {matchLabels: {role: backend}}
ingress:
- fromEndpoints:
  - matchLabels: {role: frontend}`,
		"l4 egress": `
endpointSelector: {matchLabels: {app: myService}}
egress:
- toPorts:
  - ports: [{port: "80", protocol: TCP}]`,
		"cidr and entities": `
endpointSelector: {matchLabels: {"k8s:app": web, "k8s:io.kubernetes.pod.namespace": default}}
egress:
- toCIDR: [20.1.1.1/32]
- toCIDRSet:
  - cidr: 10.0.0.0/8
    except: [10.96.0.0/12]
- toEntities: [world, kube-apiserver]
ingress:
- fromEntities: [cluster, host]
  toPorts:
  - ports: [{port: "8000", endPort: 8080, protocol: TCP}, {port: http}]`,
		"deny": `
endpointSelector: {}
ingressDeny:
- fromEndpoints:
  - matchExpressions: [{key: env, operator: In, values: [dev]}]
  toPorts: [{ports: [{port: "22", protocol: ANY}]}]
egressDeny:
- toCIDR: [192.168.0.10]`,
		"services": `
endpointSelector: {matchLabels: {id: app2}}
egress:
- toServices:
  - k8sService: {serviceName: myservice, namespace: default}
  - k8sServiceSelector:
      selector: {matchLabels: {external: "yes"}}
egressDeny:
- toServices:
  - k8sService: {serviceName: db}`,
		"cidr groups": `
endpointSelector: {matchLabels: {kind: client}}
egressDeny:
- toCIDRSet:
  - cidrGroupRef: cilium-test-external-cidr
    except: [192.0.2.1/32, "2001:db8::1/128"]
  - cidrGroupSelector: {matchLabels: {destination: external}}
ingress:
- fromCIDRSet:
  - cidrGroupSelector:
      matchExpressions: [{key: team, operator: In, values: [a, b]}]
    except: [10.0.0.1]`,
		"host policy": `
nodeSelector: {matchLabels: {"node-role.kubernetes.io/control-plane": ""}}
ingress:
- fromEntities: [remote-node]
  icmps: [{fields: [{type: "8", family: IPv4}]}]`,
	}
	for name, y := range docs {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeRule([]byte(y)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDecodeRuleErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"no selector", `ingress: [{fromEntities: [world]}]`, "spec.endpointSelector: Required"},
		{"both selectors", `{endpointSelector: {}, nodeSelector: {}}`, "spec.nodeSelector"},
		{"unknown field", `{endpointSelector: {}, ingres: []}`, `unknown field "ingres"`},
		{"bad entity", `{endpointSelector: {}, ingress: [{fromEntities: [everything]}]}`,
			"spec.ingress[0].fromEntities[0]: Unsupported value: \"everything\""},
		{"bad cidr", `{endpointSelector: {}, egress: [{toCIDR: [10.0.0.0/33]}]}`, "spec.egress[0].toCIDR[0]"},
		{"except outside", `{endpointSelector: {}, egress: [{toCIDRSet: [{cidr: 10.0.0.0/8, except: [11.0.0.0/16]}]}]}`,
			"spec.egress[0].toCIDRSet[0].except[0]"},
		{"empty cidr rule", `{endpointSelector: {}, egress: [{toCIDRSet: [{except: [10.0.0.0/8]}]}]}`,
			"spec.egress[0].toCIDRSet[0].cidr: Required value: one of cidr, cidrGroupRef or cidrGroupSelector is required"},
		{"cidr and group", `{endpointSelector: {}, egress: [{toCIDRSet: [{cidr: 10.0.0.0/8, cidrGroupRef: g}]}]}`,
			"spec.egress[0].toCIDRSet[0].cidrGroupRef: Invalid value: \"\": only one of cidr, cidrGroupRef or cidrGroupSelector may be set, not cidr and cidrGroupRef"},
		{"group and selector", `{endpointSelector: {}, ingressDeny: [{fromCIDRSet: [{cidrGroupRef: g, cidrGroupSelector: {}}]}]}`,
			"spec.ingressDeny[0].fromCIDRSet[0].cidrGroupSelector: Invalid value: \"\": only one of cidr, cidrGroupRef or cidrGroupSelector may be set, not cidrGroupRef and cidrGroupSelector"},
		{"bad group name", `{endpointSelector: {}, egressDeny: [{toCIDRSet: [{cidrGroupRef: Not_A_Name}]}]}`,
			"spec.egressDeny[0].toCIDRSet[0].cidrGroupRef: Invalid value: \"Not_A_Name\""},
		{"bad group selector", `{endpointSelector: {}, ingress: [{fromCIDRSet: [{cidrGroupSelector: {matchExpressions: [{key: a, operator: Has}]}}]}]}`,
			"spec.ingress[0].fromCIDRSet[0].cidrGroupSelector.matchExpressions[0].operator"},
		{"bad group except", `{endpointSelector: {}, egress: [{toCIDRSet: [{cidrGroupRef: g, except: [10.0.0.0/40]}]}]}`,
			"spec.egress[0].toCIDRSet[0].except[0]: Invalid value: \"10.0.0.0/40\""},
		{"port too big", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "70000"}]}]}]}`,
			"spec.ingress[0].toPorts[0].ports[0].port"},
		{"range backwards", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "90", endPort: 80}]}]}]}`,
			"spec.ingress[0].toPorts[0].ports[0].endPort"},
		{"range without a start port", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{endPort: 1023, protocol: TCP}]}]}]}`,
			"spec.ingress[0].toPorts[0].ports[0].endPort"},
		{"range from port 0", `{endpointSelector: {}, egress: [{toPorts: [{ports: [{port: "0", endPort: 1023}]}]}]}`,
			"spec.egress[0].toPorts[0].ports[0].endPort"},
		{"named range", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: http, endPort: 80}]}]}]}`,
			"a range needs a numeric port"},
		{"bad protocol", `{endpointSelector: {}, egressDeny: [{toPorts: [{ports: [{port: "1", protocol: GRE}]}]}]}`,
			"spec.egressDeny[0].toPorts[0].ports[0].protocol"},
		{"bad operator", `{endpointSelector: {matchExpressions: [{key: a, operator: Has}]}}`,
			"spec.endpointSelector.matchExpressions[0].operator"},
		{"bad label key", `{endpointSelector: {matchLabels: {"bad key!": x}}}`, "spec.endpointSelector.matchLabels[bad key!]"},
		{"l7 rules", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "80"}], rules: {http: [{method: GET}]}}]}]}`,
			"spec.ingress[0].toPorts[0].rules: Forbidden"},
		{"no service", `{endpointSelector: {}, egress: [{toServices: [{}]}]}`,
			"spec.egress[0].toServices[0].k8sService: Required"},
		{"service without a name", `{endpointSelector: {}, egress: [{toServices: [{k8sService: {serviceName: a}}, {k8sService: {namespace: b}}]}]}`,
			"spec.egress[0].toServices[1].k8sService.serviceName: Required"},
		{"service name and selector", `{endpointSelector: {}, egressDeny: [{toServices: [{k8sService: {serviceName: a}, k8sServiceSelector: {selector: {}}}]}]}`,
			"spec.egressDeny[0].toServices[0].k8sServiceSelector"},
		{"bad service namespace", `{endpointSelector: {}, egress: [{toServices: [{k8sServiceSelector: {selector: {}, namespace: A_B}}]}]}`,
			"spec.egress[0].toServices[0].k8sServiceSelector.namespace: Invalid value"},
		{"icmps with ports", `{endpointSelector: {}, ingress: [{icmps: [{fields: [{type: "8"}]}], toPorts: [{ports: [{port: "1"}]}]}]}`,
			"spec.ingress[0].icmps: Forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRule([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRawRulesRoundTrip(t *testing.T) {
	var r Rule
	in := `{"endpointSelector":{},"ingress":[{"toPorts":[{"ports":[{"port":"80"}],"rules":{"http":[{"method":"GET"}]}}]}]}`
	if err := yamlUnmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	out, err := jsonMarshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatalf("round trip:\n got %s\nwant %s", out, in)
	}
	cp := r.DeepCopy()
	cp.Ingress[0].ToPorts[0].Rules.Raw[0] = 'X'
	if r.Ingress[0].ToPorts[0].Rules.Raw[0] == 'X' {
		t.Fatal("DeepCopy shares the raw rules")
	}
}
