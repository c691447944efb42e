package k8s_test

import (
	"net/netip"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// A policy whose allow rules name only IPv6 peers or ICMPv6 types is
// accepted, isolates its endpoints, and lets nothing through: not the
// world, not a pod, not an IPv6 CIDR identity were one ever made.
func TestOnlyIPv6RulesAllowNothing(t *testing.T) {
	const doc = `
metadata: {name: v6only, namespace: x}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress:
  - fromCIDR: ["::/0"]
  - fromCIDRSet: [{cidr: "::/0", except: ["2606:4700:4700::/96"]}]
    toPorts: [{ports: [{port: "80"}]}]
  - icmps: [{fields: [{family: IPv6, type: 128}]}]
  egress:
  - toCIDR: ["::/0"]
  - toCIDRSet: [{cidr: "2606:4700:4700::/96", except: ["2606:4700:4700::1001/128"]}]
  - icmps: [{fields: [{family: IPv6, type: EchoRequest}]}]
`
	p := &v2.CiliumNetworkPolicy{}
	if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
		t.Fatal(err)
	}
	rules, err := policyk8s.FromCNP(p, policyk8s.Cluster{})
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	e := policy.NewEngine(policy.ModeDefault)
	web := appIdentity(1000, "web")
	web.Labels.Add(labels.New(labels.SourceK8s, labels.KeyPodNamespace, "x"))
	other := appIdentity(1001, "db")
	other.Labels.Add(labels.New(labels.SourceK8s, labels.KeyPodNamespace, "x"))
	v6 := &policy.Identity{ID: identity.LocalIdentityFlag | 1, Prefix: netip.MustParsePrefix("2606:4700:4700::1111/128")}
	v4 := &policy.Identity{ID: identity.LocalIdentityFlag | 2, Prefix: netip.MustParsePrefix("1.1.1.1/32")}
	for _, id := range []*policy.Identity{web, other, v6, v4} {
		e.UpsertIdentity(id)
	}
	e.SetRules(policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "v6only"}, rules)
	remotes := []*policy.Identity{other, v6, v4}
	for _, num := range []identity.NumericIdentity{identity.World, identity.WorldIPv4, identity.WorldIPv6, identity.Host} {
		id, ok := e.Identity(num)
		if !ok {
			t.Fatalf("no identity %d", num)
		}
		remotes = append(remotes, id)
	}
	for _, dir := range []spec.Direction{spec.Ingress, spec.Egress} {
		for _, remote := range remotes {
			for _, c := range []struct {
				proto uint8
				port  uint16
			}{{spec.ProtoTCP, 80}, {spec.ProtoUDP, 53}, {spec.ProtoICMP, 8}, {spec.ProtoICMP, 128}} {
				v := e.Trace(web, nil, dir, remote, c.proto, c.port)
				if !v.Enforced {
					t.Errorf("%v: not isolated", dir)
				}
				if v.Allowed && !(dir == spec.Ingress && remote.ID == identity.Host) {
					t.Errorf("%v %d proto %d port %d allowed by %v", dir, remote.ID, c.proto, c.port, v.DecidedBy)
				}
			}
		}
	}
}

func appIdentity(num identity.NumericIdentity, app string) *policy.Identity {
	ls := labels.Labels{}
	ls.Add(labels.New(labels.SourceK8s, "app", app))
	return &policy.Identity{ID: num, Labels: ls}
}
