package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium-go/cilium/lab/internal/plan"
)

func ciliumPlan(t *testing.T) plan.Plan {
	t.Helper()
	o := plan.DefaultOptions()
	o.InstallDir = "/src/install/kubernetes"
	o.RoutingMode = "native"
	p, err := plan.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The repository's own manifests hold what the lab's cilium-go runs as.
func TestInstallRBACFromTheRepository(t *testing.T) {
	objs, err := installRBAC(filepath.Join("..", "..", "..", "install", "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	for _, u := range objs {
		kinds[u.GetKind()] = append(kinds[u.GetKind()], u.GetName())
	}
	if !slices.Contains(kinds["ServiceAccount"], agentSA) || !slices.Contains(kinds["ServiceAccount"], operatorSA) ||
		len(kinds["ClusterRole"]) == 0 || len(kinds["ClusterRoleBinding"]) == 0 {
		t.Fatalf("objects %v: want both ServiceAccounts with ClusterRoles and bindings", kinds)
	}
	if len(kinds["DaemonSet"])+len(kinds["Deployment"])+len(kinds["CustomResourceDefinition"]) != 0 {
		t.Fatalf("workloads or CRDs taken: %v", kinds)
	}
}

func TestInstallRBACNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	sa := "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: cilium, namespace: kube-system}\n"
	if err := os.WriteFile(filepath.Join(dir, "rbac.yaml"), []byte(sa), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := installRBAC(dir)
	if err == nil || !strings.Contains(err.Error(), "kube-system/cilium-operator") {
		t.Fatalf("error %v, want one naming the missing operator ServiceAccount", err)
	}
}

func TestCiliumProcesses(t *testing.T) {
	p := ciliumPlan(t)
	n := p.Nodes[1]
	a := agentProcess(p, n, "/b")
	args := strings.Join(a.Args, " ")
	for _, want := range []string{"--k8s-node-name=lab-node2", "--node-ipv4=172.30.0.12", "--routing-mode=native",
		"--write-cni-conf-when-ready=/etc/cni/net.d/05-cilium.conflist", "--kubeconfig=" + agentKubeconfig(n)} {
		if !strings.Contains(args, want) {
			t.Errorf("agent args %q lack %s", args, want)
		}
	}
	if a.Namespaces != nodeNamespaces(n) {
		t.Errorf("agent runs in %+v, want the node's namespaces", a.Namespaces)
	}
	if a.Cgroup != n.Cgroup || n.Cgroup == "" {
		t.Errorf("agent in cgroup %q, want the node's %q", a.Cgroup, n.Cgroup)
	}
	// Without kube-proxy (the default), the agent replaces it, balancing
	// the sockets of its own node's cgroup only; beside kube-proxy it
	// routes through the node's stack as before.
	for _, want := range []string{"--kube-proxy-replacement=true", "--enable-host-legacy-routing=false", "--cgroup-root=" + n.Cgroup} {
		if !slices.Contains(a.Args, want) {
			t.Errorf("agent args %q lack %s", args, want)
		}
	}
	p.KubeProxy = "iptables"
	if beside := strings.Join(agentProcess(p, n, "/b").Args, " "); strings.Contains(beside, "kube-proxy-replacement") ||
		strings.Contains(beside, "cgroup") {
		t.Errorf("agent args beside kube-proxy %q", beside)
	}
	ops := operatorProcesses(p, "/b")
	if len(ops) != 2 || ops[0].Name == ops[1].Name || ops[0].Namespaces.Net != p.ControlPlaneNS {
		t.Fatalf("operators %+v: want two distinct replicas in the control plane", ops)
	}
	for _, o := range ops {
		if !slices.Contains(o.Args, "--cluster-pool-ipv4-cidr=10.244.0.0/16") || !slices.Contains(o.Args, "--cluster-pool-ipv4-mask-size=24") {
			t.Errorf("operator args %v: want the lab's cluster CIDR and mask", o.Args)
		}
	}
	if controlPlaneConfig(p, "/b").AllocateNodeCIDRs {
		t.Error("the controller manager allocates node CIDRs beside cilium-go's operator")
	}
}

func TestCiliumNodePodRoutes(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"addresses": []any{
			map[string]any{"type": "ExternalIP", "ip": "1.2.3.4"},
			map[string]any{"type": "InternalIP", "ip": "172.30.0.12"},
		},
		"ipam": map[string]any{"podCIDRs": []any{"10.244.1.0/24", "fd00::/64", "junk"}},
	}}
	got := ciliumNodePodRoutes(obj, netip.MustParseAddr("172.30.0.99"))
	want := map[netip.Prefix]netip.Addr{netip.MustParsePrefix("10.244.1.0/24"): netip.MustParseAddr("172.30.0.12")}
	if len(got) != 1 || got[netip.MustParsePrefix("10.244.1.0/24")] != want[netip.MustParsePrefix("10.244.1.0/24")] {
		t.Fatalf("routes %v, want %v", got, want)
	}
	noAddr := map[string]any{"spec": map[string]any{"ipam": map[string]any{"podCIDRs": []any{"10.244.2.0/24"}}}}
	if r := ciliumNodePodRoutes(noAddr, netip.Addr{}); len(r) != 0 {
		t.Fatalf("a CiliumNode without an address, and no Node's, gave routes %v", r)
	}
	// cilium-go's CiliumNodes carry no addresses: the Node's InternalIP stands in.
	r := ciliumNodePodRoutes(noAddr, netip.MustParseAddr("172.30.0.13"))
	if len(r) != 1 || r[netip.MustParsePrefix("10.244.2.0/24")] != netip.MustParseAddr("172.30.0.13") {
		t.Fatalf("a CiliumNode without an address, with its Node's: routes %v", r)
	}
}

// TestRelayServesTheCLIWithMutualTLS: the relay's server certificate is
// the one the hubble CLI verifies (hubble.hubble-relay.cilium.io), and
// the CA it takes clients of signs the CLI's certificate.
func TestRelayServesTheCLIWithMutualTLS(t *testing.T) {
	p := ciliumPlan(t)
	p.StateDir = t.TempDir()
	if err := ensureHubbleCerts(p); err != nil {
		t.Fatal(err)
	}
	r := relayProcess(p, "/b")
	arg := func(flag string) string {
		for _, a := range r.Args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v
			}
		}
		t.Fatalf("relay args %q lack %s", r.Args, flag)
		return ""
	}
	verify := func(certFile, keyFile, caFile, name string, usage x509.ExtKeyUsage) {
		t.Helper()
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		pem, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		if _, err := kp.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s: %v", certFile, err)
		}
	}
	ca := hubbleTLS(p, "ca.crt")
	verify(arg("--tls-relay-server-cert-file"), arg("--tls-relay-server-key-file"), ca, "hubble.hubble-relay.cilium.io", x509.ExtKeyUsageServerAuth)
	verify(hubbleTLS(p, "cli.crt"), hubbleTLS(p, "cli.key"), arg("--tls-relay-client-ca-files"), "", x509.ExtKeyUsageClientAuth)
	if slices.Contains(r.Args, "--disable-server-tls") {
		t.Error("the relay serves in plaintext")
	}
}
