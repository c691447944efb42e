package api

import (
	"encoding/json"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }
func jsonMarshal(v any) ([]byte, error)   { return json.Marshal(v) }

// FuzzDecodeRule feeds arbitrary documents to DecodeRule: it must not panic,
// and a rule it accepts must survive encoding and decoding unchanged and still
// be valid.
func FuzzDecodeRule(f *testing.F) {
	for _, s := range []string{
		`{endpointSelector: {matchLabels: {role: backend}}, ingress: [{fromEndpoints: [{matchLabels: {role: frontend}}]}]}`,
		`{endpointSelector: {}, egress: [{toCIDRSet: [{cidr: 10.0.0.0/8, except: [10.1.0.0/16]}]}]}`,
		`{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "80", endPort: 90, protocol: TCP}]}]}]}`,
		`{nodeSelector: {}, ingressDeny: [{fromEntities: [world], toPorts: [{ports: [{port: "22"}]}]}]}`,
		`{endpointSelector: {matchExpressions: [{key: a, operator: In, values: [b]}]}, egress: [{toEntities: [all]}]}`,
		`{endpointSelector: {}, egress: [{icmps: [{fields: [{type: "8"}]}]}], labels: [{key: a, source: k8s}]}`,
		`{endpointSelector: {}, egress: [{toServices: [{k8sService: {serviceName: db, namespace: y}}, {k8sServiceSelector: {selector: {matchLabels: {a: b}}}}]}]}`,
		`{endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: "80", protocol: TCP}], rules: {http: [{method: GET, path: "/a.*", headerMatches: [{name: X, value: y, mismatch: LOG}]}]}}]}]}`,
		`{endpointSelector: {}, egress: [{toFQDNs: [{matchPattern: "*.a.com"}], toPorts: [{ports: [{port: "53", protocol: ANY}], rules: {dns: [{matchName: a.com}]}}]}]}`,
		`[]`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRule(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("encode accepted rule: %v", err)
		}
		r2, err := DecodeRule(out)
		if err != nil {
			t.Fatalf("re-decode %s: %v", out, err)
		}
		if !reflect.DeepEqual(normalize(r), normalize(r2)) {
			t.Fatalf("round trip changed the rule:\n%s", out)
		}
	})
}

// normalize re-encodes r so nil and empty collections compare equal.
func normalize(r *Rule) string {
	b, _ := json.Marshal(r)
	return string(b)
}
