package addons

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cilium-go/cilium/lab/internal/apply"
)

func TestCoreDNSManifests(t *testing.T) {
	b, err := CoreDNS(netip.MustParseAddr("10.96.0.10"), "cluster.local", nil)
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
func corefile(t *testing.T, hosts []Host) string {
	t.Helper()
	b, err := CoreDNS(netip.MustParseAddr("10.96.0.10"), "cluster.local", hosts)
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

// The world's names are a hosts block of the one server block, falling through to
// the kubernetes plugin for every other name.
func TestCorefileHosts(t *testing.T) {
	got := corefile(t, []Host{
		{Name: "world.cilium-lab.test", IP: netip.MustParseAddr("192.0.2.1")},
		{Name: "other.world.cilium-lab.test", IP: netip.MustParseAddr("192.0.2.2")},
	})
	want := `    ready
    hosts {
        192.0.2.1 world.cilium-lab.test
        192.0.2.2 other.world.cilium-lab.test
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
`
	if !strings.Contains(got, want) {
		t.Errorf("Corefile\n%s\nwant it to hold\n%s", got, want)
	}
	if !strings.HasPrefix(got, ".:53 {\n") || !strings.HasSuffix(got, "\n}\n") ||
		strings.Count(got, "{") != strings.Count(got, "}") || strings.Count(got, ".:53") != 1 {
		t.Errorf("Corefile is not one balanced server block:\n%s", got)
	}

	// No hosts, no block.
	if got := corefile(t, nil); strings.Contains(got, "hosts") || !strings.Contains(got, "    ready\n    kubernetes cluster.local") {
		t.Errorf("Corefile without hosts:\n%s", got)
	}
}
