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
		"l7 http (star wars)": `
endpointSelector: {matchLabels: {org: empire, class: deathstar}}
ingress:
- fromEndpoints:
  - matchLabels: {org: empire}
  toPorts:
  - ports: [{port: "80", protocol: TCP}]
    rules:
      http:
      - method: POST
        path: "/v1/request-landing"`,
		"l7 http headers": `
endpointSelector: {matchLabels: {app: service}}
ingress:
- toPorts:
  - ports: [{port: "80", protocol: TCP}, {port: http, protocol: TCP}, {port: "8080", endPort: 8090, protocol: TCP}]
    rules:
      http:
      - method: GET
        path: "/public/.*"
        host: "api\\.example\\.com"
        headers: ["X-My-Header: true", X-Other]
        headerMatches:
        - {name: User-Agent, value: curl, mismatch: LOG}
        - {name: X-Token, value: abc}
  - ports: [{port: "8000", protocol: TCP}]
    rules: {http: [{}]}
  - ports: [{port: "53", protocol: UDP}]
    rules: {}`,
		"dns (kubernetes-dns) and toFQDNs": `
endpointSelector: {matchLabels: {org: alliance, class: mediabot}}
egress:
- toFQDNs:
  - matchName: api.github.com
- toEndpoints:
  - matchLabels:
      "k8s:io.kubernetes.pod.namespace": kube-system
      "k8s:k8s-app": kube-dns
  toPorts:
  - ports: [{port: "53", protocol: ANY}]
    rules:
      dns:
      - matchPattern: "*"`,
		"toFQDNs with ports and dns rules over TCP and UDP": `
endpointSelector: {}
egress:
- toFQDNs: [{matchPattern: "*.cilium.io"}, {matchPattern: "**.github.com"}, {matchName: cilium.io.}]
  toPorts: [{ports: [{port: "443", protocol: TCP}]}]
- toEntities: [cluster]
  toPorts:
  - ports: [{port: "53", protocol: UDP}, {port: "53", protocol: TCP}, {port: dns}]
    rules: {dns: [{matchName: cilium.io}, {matchPattern: "sub*.cilium.io"}]}`,
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

// Layer-7 rules and toFQDNs that Cilium refuses, and the fields of Cilium's
// that this agent does not implement: each error names its field.
func TestDecodeRuleL7Errors(t *testing.T) {
	// http80 is an ingress rule with the toPorts entry of port 80 and
	// the given rules.
	http80 := func(rules string) string {
		return `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "80", protocol: TCP}], rules: ` + rules + `}]}]}`
	}
	dns53 := func(ports, rules string) string {
		return `{endpointSelector: {}, egress: [{toPorts: [{ports: ` + ports + `, rules: ` + rules + `}]}]}`
	}
	const ingressPorts = "spec.ingress[0].toPorts[0]."
	const egressPorts = "spec.egress[0].toPorts[0]."
	tests := []struct {
		name, yaml, want string
	}{
		{"bad path", http80(`{http: [{method: GET}, {path: "/a("}]}`),
			ingressPorts + `rules.http[1].path: Invalid value: "/a(": error parsing regexp`},
		{"bad method", http80(`{http: [{method: "GET|("}]}`), ingressPorts + `rules.http[0].method: Invalid value: "GET|("`},
		{"bad host", http80(`{http: [{host: "[a"}]}`), ingressPorts + `rules.http[0].host: Invalid value: "[a"`},
		{"header without a name", http80(`{http: [{headers: [": x"]}]}`), ingressPorts + `rules.http[0].headers[0]: Invalid value: ": x"`},
		{"bad mismatch", http80(`{http: [{headerMatches: [{name: a, mismatch: DROP}]}]}`),
			ingressPorts + `rules.http[0].headerMatches[0].mismatch: Invalid value: "DROP"`},
		{"header match without a name", http80(`{http: [{headerMatches: [{value: a}]}]}`),
			ingressPorts + `rules.http[0].headerMatches[0].name`},
		{"header from a secret", http80(`{http: [{headerMatches: [{name: X-Token, secret: {name: token}}]}]}`),
			ingressPorts + `rules.http[0].headerMatches[0].secret: Forbidden: secrets are not supported`},
		{"http over UDP", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "80", protocol: UDP}], rules: {http: [{}]}}]}]}`,
			ingressPorts + `ports[0].protocol: Invalid value: "UDP": HTTP rules apply to TCP only`},
		{"http over ANY", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "80", protocol: ANY}], rules: {http: [{}]}}]}]}`,
			ingressPorts + `ports[0].protocol: Invalid value: "ANY"`},
		{"http without a protocol", `{endpointSelector: {}, egress: [{toPorts: [{ports: [{port: "80"}], rules: {http: [{}]}}]}]}`,
			egressPorts + `ports[0].protocol: Invalid value: ""`},
		{"http on port 0", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "0", protocol: TCP}], rules: {http: [{}]}}]}]}`,
			ingressPorts + `ports[0].port: Invalid value: "0": layer-7 rules need a port other than 0`},
		{"http without a port", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{protocol: TCP}], rules: {http: [{}]}}]}]}`,
			ingressPorts + `ports[0].port: Invalid value: ""`},
		{"http without ports", `{endpointSelector: {}, ingress: [{toPorts: [{rules: {http: [{}]}}]}]}`,
			ingressPorts + `ports: Required value: layer-7 rules need a port`},
		{"dns without ports", dns53(`[]`, `{dns: [{matchPattern: "*"}]}`), egressPorts + `ports: Required value`},
		{"dns over a range", dns53(`[{port: "53", endPort: 60, protocol: UDP}]`, `{dns: [{matchPattern: "*"}]}`),
			egressPorts + `ports[0].endPort: Invalid value: 60: DNS rules do not take a port range`},
		{"dns over SCTP", dns53(`[{port: "53", protocol: SCTP}]`, `{dns: [{matchPattern: "*"}]}`),
			egressPorts + `ports[0].protocol: Invalid value: "SCTP"`},
		{"dns on ingress", `{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "53"}], rules: {dns: [{matchName: a.com}]}}]}]}`,
			ingressPorts + `rules.dns: Forbidden: DNS rules apply to egress only`},
		{"http and dns", dns53(`[{port: "53", protocol: TCP}]`, `{http: [{}], dns: [{matchName: a.com}]}`),
			egressPorts + `rules.dns: Forbidden: http and dns rules cannot be combined in one toPorts entry`},
		{"dns name and pattern", dns53(`[{port: "53"}]`, `{dns: [{matchName: a.com, matchPattern: "*.a.com"}]}`),
			egressPorts + `rules.dns[0].matchPattern: Invalid value: "*.a.com": matchName and matchPattern are mutually exclusive`},
		{"dns without a name", dns53(`[{port: "53"}]`, `{dns: [{}]}`), egressPorts + `rules.dns[0].matchName: Required value`},
		{"bad dns name", dns53(`[{port: "53"}]`, `{dns: [{matchName: "a*.com"}]}`), egressPorts + `rules.dns[0].matchName: Invalid value: "a*.com"`},
		{"bad fqdn pattern", `{endpointSelector: {}, egress: [{toFQDNs: [{matchName: a.com}, {matchPattern: "*.cilium.io/"}]}]}`,
			`spec.egress[0].toFQDNs[1].matchPattern: Invalid value: "*.cilium.io/"`},
		{"fqdn without a name", `{endpointSelector: {}, egress: [{toFQDNs: [{}]}]}`, `spec.egress[0].toFQDNs[0].matchName: Required value`},
		{"fqdns and other peers", `{endpointSelector: {}, egress: [{toFQDNs: [{matchName: a.com}], toEndpoints: [{}], toEntities: [world]}]}`,
			`spec.egress[0].toFQDNs: Forbidden: cannot be combined with toEndpoints, toEntities in one rule`},
		{"kafka", http80(`{kafka: [{topic: deathstar-plans}]}`),
			ingressPorts + `rules.kafka: Forbidden: Kafka rules are not supported (Cilium removed them in 1.20)`},
		{"l7proto", http80(`{l7proto: envoy.filters.network.foo, l7: [{action: deny}]}`), ingressPorts + `rules.l7proto: Forbidden`},
		{"l7", http80(`{l7: [{action: deny}]}`), ingressPorts + `rules.l7: Forbidden`},
		{"server names", `{endpointSelector: {}, egress: [{toPorts: [{ports: [{port: "443", protocol: TCP}], serverNames: [a.com]}]}]}`,
			egressPorts + `serverNames: Forbidden`},
		{"terminating TLS", `{endpointSelector: {}, egress: [{toPorts: [{ports: [{port: "443"}], terminatingTLS: {secret: {name: s}}}]}]}`,
			egressPorts + `terminatingTLS: Forbidden`},
		{"originating TLS", `{endpointSelector: {}, egress: [{toPorts: [{ports: [{port: "443"}], originatingTLS: {secret: {name: s}}}]}]}`,
			egressPorts + `originatingTLS: Forbidden`},
		{"listener", `{endpointSelector: {}, egress: [{toPorts: [{ports: [{port: "80"}], listener: {envoyConfig: {name: cec}, name: l}}]}]}`,
			egressPorts + `listener: Forbidden: Envoy listeners are not supported`},
		{"rules of a deny", `{endpointSelector: {}, ingressDeny: [{toPorts: [{ports: [{port: "80"}], rules: {http: [{}]}}]}]}`,
			`unknown field "rules"`},
		{"l7 on a host's ingress", `{nodeSelector: {}, ingress: [{toPorts: [{ports: [{port: "80", protocol: TCP}], rules: {http: [{}]}}]}]}`,
			ingressPorts + `rules.http: Forbidden: layer-7 rules are not supported in a host policy's ingress rules`},
		{"http on a host's egress", `{nodeSelector: {}, egress: [{toPorts: [{ports: [{port: "80", protocol: TCP}], rules: {http: [{}]}}]}]}`,
			egressPorts + `rules.http: Forbidden: HTTP rules are not supported in a host policy`},
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

// A policy written for Cilium survives a JSON round trip whole: the rules
// this agent refuses too, so that its status can name them.
func TestL7RulesRoundTrip(t *testing.T) {
	for _, in := range []string{
		`{"endpointSelector":{},"ingress":[{"toPorts":[{"ports":[{"port":"80","protocol":"TCP"}],"rules":{"http":[` +
			`{"path":"/v1/request-landing","method":"POST","host":"a\\.com","headers":["X-My-Header: true"],` +
			`"headerMatches":[{"mismatch":"REPLACE","name":"X-Token","secret":{"namespace":"x","name":"s"},"value":"t"}]},{}]}}]}],` +
			`"egress":[{"toPorts":[{"ports":[{"port":"53","protocol":"ANY"}],"rules":{"dns":[{"matchPattern":"*"}]}}]},` +
			`{"toPorts":[{"ports":[{"port":"443"}]}],"toFQDNs":[{"matchName":"api.github.com"}]}]}`,
		`{"endpointSelector":{},"egress":[{"toPorts":[{"ports":[{"port":"9092"}],` +
			`"terminatingTLS":{"secret":{"name":"t"},"trustedCA":"ca.crt"},"originatingTLS":{"secret":{"name":"o"},"privateKey":"k"},` +
			`"serverNames":["a.com"],"listener":{"envoyConfig":{"kind":"CiliumEnvoyConfig","name":"cec"},"name":"l","priority":3},` +
			`"rules":{"kafka":[{"role":"produce","topic":"deathstar-plans"}],"l7proto":"x","l7":[{"action":"deny"}]}}]}]}`,
	} {
		var r Rule
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
		if out, _ := jsonMarshal(cp); string(out) != in {
			t.Fatalf("DeepCopy:\n got %s\nwant %s", out, in)
		}
	}
	var r Rule
	if err := yamlUnmarshal([]byte(`{"endpointSelector":{},"egress":[{"toPorts":[{"rules":{"http":[{"headers":["a"]}],"kafka":[{"topic":"t"}]}}]}]}`), &r); err != nil {
		t.Fatal(err)
	}
	cp := r.DeepCopy()
	cp.Egress[0].ToPorts[0].Rules.HTTP[0].Headers[0] = "b"
	cp.Egress[0].ToPorts[0].Rules.Kafka[0][0] = 'X'
	if rules := r.Egress[0].ToPorts[0].Rules; rules.HTTP[0].Headers[0] != "a" || rules.Kafka[0][0] == 'X' {
		t.Fatal("DeepCopy shares the rules")
	}
}
