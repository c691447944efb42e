package crdgen

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// The schema of toPorts' rules and of toFQDNs has the limits of Cilium's:
// DNS names of at most 255 characters of DNS labels, the mismatch actions,
// a header's name. It keeps the Kafka rules Cilium 1.20 removed, so that
// the agent refuses them by name rather than the API server pruning them
// into rules that allow more.
func TestCNPSchemaOfL7RulesAndFQDNs(t *testing.T) {
	egress := structuralCNP(t).Properties["spec"].Properties["egress"].Items
	rules := egress.Properties["toPorts"].Items.Properties["rules"]
	matchers := map[string]schema.Structural{
		"toFQDNs":   *egress.Properties["toFQDNs"].Items,
		"rules.dns": *rules.Properties["dns"].Items,
	}
	for where, m := range matchers {
		for prop, name := range map[string]string{"matchName": "api.github.com", "matchPattern": "**.cilium.io"} {
			p := m.Properties[prop]
			if p.ValueValidation == nil || p.ValueValidation.MaxLength == nil || *p.ValueValidation.MaxLength != 255 {
				t.Errorf("%s.%s: %+v, want at most 255 characters", where, prop, p.ValueValidation)
				continue
			}
			re := regexp.MustCompile(p.ValueValidation.Pattern)
			if !re.MatchString(name) || re.MatchString(name+"/") {
				t.Errorf("%s.%s: pattern %s, want it to take %q, not %q", where, prop, re, name, name+"/")
			}
		}
	}
	hm := rules.Properties["http"].Items.Properties["headerMatches"].Items
	var actions []string
	for _, v := range hm.Properties["mismatch"].ValueValidation.Enum {
		actions = append(actions, v.Object.(string))
	}
	if got := strings.Join(actions, " "); got != "LOG ADD DELETE REPLACE" {
		t.Errorf("mismatch actions %s", got)
	}
	if name := hm.Properties["name"]; name.ValueValidation == nil || name.ValueValidation.MinLength == nil || *name.ValueValidation.MinLength != 1 {
		t.Errorf("headerMatches name: %+v, want at least a character", name.ValueValidation)
	}
	if kafka := rules.Properties["kafka"].Items; kafka == nil || !kafka.XPreserveUnknownFields {
		t.Errorf("kafka rules: %+v, want kept as they are", kafka)
	}
}
