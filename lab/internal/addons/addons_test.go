package addons

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium-go/cilium/lab/internal/apply"
)

func TestCoreDNSManifests(t *testing.T) {
	b, err := CoreDNS(netip.MustParseAddr("10.96.0.10"), "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := apply.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()+"/"+o.GetName()] = true
	}
	for _, want := range []string{"Service/kube-dns", "Deployment/coredns", "ConfigMap/coredns", "ClusterRoleBinding/system:coredns"} {
		if !kinds[want] {
			t.Errorf("missing %s in %v", want, kinds)
		}
	}
	if !strings.Contains(string(b), "clusterIP: 10.96.0.10") || !strings.Contains(string(b), "kubernetes cluster.local in-addr.arpa") {
		t.Error("DNS IP or domain not substituted")
	}
}
