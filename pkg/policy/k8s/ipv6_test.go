package k8s_test

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

func decodeCNP(t *testing.T, doc string) *v2.CiliumNetworkPolicy {
	t.Helper()
	p := &v2.CiliumNetworkPolicy{}
	if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The connectivity suite's policies name IPv6 peers and ICMPv6 types next
// to IPv4 ones (its manifests, with its default addresses). In this
// IPv4-only cluster the IPv6 parts select nothing, and never widen a rule.
func TestFromCNPSuiteIPv6Shapes(t *testing.T) {
	icmp := func(n uint16) policy.Port { return policy.Port{Protocol: spec.ProtoICMP, Port: n} }
	tests := []struct {
		name string
		doc  string
		want []ruleView
	}{{
		name: "echo-ingress-icmp: types as numbers, per family",
		doc: `
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress:
  - fromEndpoints: [{matchLabels: {app: db}}]
    icmps:
    - fields:
      - family: IPv4
        type: 8
      - family: IPv6
        type: 128
`,
		want: []ruleView{{Dir: spec.Ingress, DefaultDeny: true, Subject: []string{"x/web"}, Peers: []string{"x/db"}, Ports: []policy.Port{icmp(8)}}},
	}, {
		name: "echo-ingress-icmp-deny: the same fields in ingressDeny",
		doc: `
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingressDeny:
  - fromEndpoints: [{matchLabels: {app: db}}]
    icmps:
    - fields:
      - family: IPv4
        type: 8
      - family: IPv6
        type: 128
`,
		want: []ruleView{{Dir: spec.Ingress, Deny: true, DefaultDeny: true, Subject: []string{"x/web"}, Peers: []string{"x/db"}, Ports: []policy.Port{icmp(8)}}},
	}, {
		name: "client-egress-icmp: no peers, every peer",
		doc: `
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  egress:
  - icmps:
    - fields:
      - type: 8
        family: IPv4
      - type: 128
        family: IPv6
`,
		want: []ruleView{{Dir: spec.Egress, DefaultDeny: true, Subject: []string{"x/web"}, Peers: []string{"*"}, Ports: []policy.Port{icmp(8)}}},
	}, {
		name: "types by name, family IPv4 by default",
		doc: `
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  egress:
  - icmps: [{fields: [{type: EchoRequest}, {type: "11"}, {type: EchoReply, family: IPv6}]}]
`,
		want: []ruleView{{Dir: spec.Egress, DefaultDeny: true, Subject: []string{"x/web"}, Peers: []string{"*"}, Ports: []policy.Port{icmp(8), icmp(11)}}},
	}, {
		name: "allow-all-egress: ::/0 next to 0.0.0.0/0",
		doc: `
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {}
  egress:
  - toCIDR: [0.0.0.0/0, "::/0"]
`,
		want: []ruleView{{Dir: spec.Egress, DefaultDeny: true, Subject: []string{"x/db", "x/web"},
			Peers: []string{"cidr:10.0.2.7", "cidr:10.9.9.9", "cidr:8.8.8.8", "world", "world-ipv4"}}},
	}, {
		name: "client-egress-to-cidr-external: an IPv6 set with an except",
		doc: `
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  egress:
  - toCIDRSet:
    - cidr: 8.8.0.0/16
      except: [8.8.4.4/32]
    - cidr: 2606:4700:4700::/96
      except: [2606:4700:4700::1001/128]
`,
		want: []ruleView{{Dir: spec.Egress, DefaultDeny: true, Subject: []string{"x/web"}, Peers: []string{"cidr:8.8.8.8"}}},
	}, {
		name: "client-egress-to-cidr-external-deny: a deny rule of IPv6 denies nothing",
		doc: `
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  egressDeny:
  - toCIDRSet: [{cidr: 8.0.0.0/8, except: [8.8.8.8/32]}]
  - toCIDRSet: [{cidr: "2606:4700:4700::/96", except: ["2606:4700:4700::1111/128"]}]
`,
		want: []ruleView{
			{Dir: spec.Egress, Deny: true, DefaultDeny: true, Subject: []string{"x/web"}},
			{Dir: spec.Egress, Deny: true, DefaultDeny: true, Subject: []string{"x/web"}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := policyk8s.FromCNP(decodeCNP(t, tt.doc), policyk8s.Cluster{})
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, rules, policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "cnp"}, tt.want)
		})
	}
}

// An attacker's policy names only IPv6 peers, or only ICMPv6 types, to
// get a rule whose peers or ports come out empty: empty must mean none.
func TestFromCNPOnlyIPv6AllowsNothing(t *testing.T) {
	for _, doc := range []string{`
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress:
  - fromCIDR: ["::/0"]
  - fromCIDRSet: [{cidr: "::/0"}]
    toPorts: [{ports: [{port: "80"}]}]
  egress:
  - toCIDR: ["2001:db8::1"]
  - icmps: [{fields: [{family: IPv6, type: 128}]}]
  - toEndpoints: [{}]
    icmps: [{fields: [{family: IPv6, type: EchoRequest}]}]
`} {
		rules, err := policyk8s.FromCNP(decodeCNP(t, doc), policyk8s.Cluster{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rules) != 5 {
			t.Fatalf("%d rules, want 5: %v", len(rules), view(rules))
		}
		for _, r := range rules {
			if len(r.Peers) != 0 {
				t.Errorf("rule %v has peers %v, want none", view([]policy.Rule{r}), r.Peers)
			}
			if !r.DefaultDeny {
				t.Errorf("rule %v does not isolate", view([]policy.Rule{r}))
			}
		}
	}
}

// Real mistakes stay errors, whatever the family.
func TestFromCNPIPv6Invalid(t *testing.T) {
	doc := `
metadata: {name: cnp, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  egress:
  - toCIDR: ["2001:db8::/129", "fd00::zz"]
  - toCIDRSet:
    - {cidr: "2606:4700:4700::/96", except: ["2606:4700:4701::/112"]}
    - {cidr: "2606:4700:4700::/96", except: ["1.0.0.1/32"]}
    - {cidr: "10.0.0.0/8", except: ["::/0"]}
  - icmps: [{fields: [{family: IPv6, type: Echo}, {family: IPv6, type: 256}, {type: RouterSolicitation}, {family: IPv5, type: 8}]}]
`
	_, err := policyk8s.FromCNP(decodeCNP(t, doc), policyk8s.Cluster{})
	checkErr(t, err, []string{
		"spec.egress[0].toCIDR[0]", "spec.egress[0].toCIDR[1]",
		"spec.egress[1].toCIDRSet[0].except[0]", "spec.egress[1].toCIDRSet[1].except[0]", "spec.egress[1].toCIDRSet[2].except[0]",
		"spec.egress[2].icmps[0].fields[0].type", "spec.egress[2].icmps[0].fields[1].type",
		"spec.egress[2].icmps[0].fields[2].type", "spec.egress[2].icmps[0].fields[3].family",
	})
}
