package crdgen

import "testing"

// An ICMP type is an int-or-string, so that the API server takes the
// connectivity suite's "type: 8" (and names), and an ICMP family defaults
// to IPv4; the schema stays structural.
func TestCNPSchemaTakesICMPTypesAsNumbersOrNames(t *testing.T) {
	s := structuralCNP(t)
	icmp := s.Properties["spec"].Properties["ingress"].Items.Properties["icmps"].Items.Properties["fields"].Items
	if typ := icmp.Properties["type"]; !typ.XIntOrString || typ.Type != "" {
		t.Errorf("type: %+v, want int-or-string", typ)
	}
	if fam := icmp.Properties["family"]; fam.Default.Object != "IPv4" {
		t.Errorf("family default %v, want IPv4", fam.Default.Object)
	}
}
