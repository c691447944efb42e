package addons

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cilium-go/cilium/lab/internal/apply"
)

func TestCoreDNSManifests(t *testing.T) {
	b, err := CoreDNS(netip.MustParseAddr("10.96.0.10"), "cluster.local", WorldDNS{})
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

// corefile renders the manifests and returns the ConfigMap's Corefile.
func corefile(t *testing.T, world WorldDNS) string {
	t.Helper()
	b, err := CoreDNS(netip.MustParseAddr("10.96.0.10"), "cluster.local", world)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := apply.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "coredns" {
			s, _, _ := unstructured.NestedString(o.Object, "data", "Corefile")
			return s
		}
	}
	t.Fatal("no ConfigMap coredns")
	return ""
}

// The world's zones are a server block of their own, forwarded to the
// world's DNS server; every other name is the cluster's.
func TestCorefileWorld(t *testing.T) {
	got := corefile(t, WorldDNS{Zones: []string{"cilium-lab.test", "github.com"}, Server: netip.MustParseAddr("192.0.2.1")})
	want := `
cilium-lab.test:53 github.com:53 {
    errors
    forward . 192.0.2.1
    cache 30
}
`
	if !strings.HasSuffix(got, want) {
		t.Errorf("Corefile\n%s\nwant it to end with\n%s", got, want)
	}
	if !strings.HasPrefix(got, ".:53 {\n") || strings.Count(got, "{") != strings.Count(got, "}") || strings.Count(got, ".:53") != 1 {
		t.Errorf("Corefile's blocks are not balanced:\n%s", got)
	}

	// No world, no block.
	if got := corefile(t, WorldDNS{}); strings.Contains(got, "forward") || strings.Count(got, ":53") != 1 {
		t.Errorf("Corefile without a world:\n%s", got)
	}
}
