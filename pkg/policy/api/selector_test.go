package api

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cilium-go/cilium/pkg/labels"
)

func TestSelectorMatches(t *testing.T) {
	web := labels.FromStrings("k8s:app=web", "k8s:io.kubernetes.pod.namespace=shop", "container:tier=front")
	host := labels.FromStrings("reserved:host")
	tests := []struct {
		sel  string
		ls   labels.Labels
		want bool
	}{
		{`{}`, web, true},
		{`{}`, host, true},
		{`{matchLabels: {app: web}}`, web, true},
		{`{matchLabels: {"k8s:app": web}}`, web, true},
		{`{matchLabels: {"any:app": web}}`, web, true},
		{`{matchLabels: {"container:app": web}}`, web, false},
		{`{matchLabels: {"k8s:tier": front}}`, web, false},
		{`{matchLabels: {tier: front}}`, web, true},
		{`{matchLabels: {app: db}}`, web, false},
		{`{matchLabels: {"reserved:host": ""}}`, host, true},
		{`{matchLabels: {"reserved:host": ""}}`, web, false},
		{`{matchLabels: {"k8s:io.kubernetes.pod.namespace": shop}}`, web, true},
		{`{matchExpressions: [{key: app, operator: In, values: [web, api]}]}`, web, true},
		{`{matchExpressions: [{key: app, operator: In, values: [api]}]}`, web, false},
		{`{matchExpressions: [{key: app, operator: NotIn, values: [api]}]}`, web, true},
		{`{matchExpressions: [{key: env, operator: NotIn, values: [dev]}]}`, web, true},
		{`{matchExpressions: [{key: "k8s:app", operator: Exists}]}`, web, true},
		{`{matchExpressions: [{key: env, operator: Exists}]}`, web, false},
		{`{matchExpressions: [{key: env, operator: DoesNotExist}]}`, web, true},
		{`{matchLabels: {app: web}, matchExpressions: [{key: app, operator: DoesNotExist}]}`, web, false},
	}
	for _, tt := range tests {
		var s EndpointSelector
		if err := yaml.UnmarshalStrict([]byte(tt.sel), &s); err != nil {
			t.Fatal(err)
		}
		if got := s.Matches(tt.ls); got != tt.want {
			t.Errorf("%s matches %v = %v, want %v", tt.sel, tt.ls, got, tt.want)
		}
	}
	var nilSel *EndpointSelector
	if nilSel.Matches(web) {
		t.Error("nil selector matched")
	}
}
