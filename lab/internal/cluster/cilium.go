package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cilium-go/cilium/lab/internal/apply"
	"github.com/cilium-go/cilium/lab/internal/controlplane"
	"github.com/cilium-go/cilium/lab/internal/pki"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/proc"
)

// The identities cilium-go runs as, from install/kubernetes: the lab's
// agents and operators use exactly the RBAC a real install grants.
const (
	ciliumNamespace  = "kube-system"
	agentSA          = "cilium"
	operatorSA       = "cilium-operator"
	operatorReplicas = 2
	// A year: the lab lives far shorter. The agents' tokens are also bound
	// to their Node and die with it.
	tokenSeconds = 365 * 24 * 3600
)

// Where cilium-go's credentials and configuration live, and its names.
func agentKubeconfig(n plan.Node) string { return filepath.Join(n.Dir, "cilium-agent.conf") }
func operatorKubeconfig(p plan.Plan) string {
	return filepath.Join(p.ControlPlaneDir, "cilium-operator.conf")
}
func operatorName(i int) string    { return fmt.Sprintf("cilium-operator-%d", i) }
func agentName(n plan.Node) string { return "cilium-agent/" + n.Name }

// ciliumCNIConf is where agents write their network configuration, inside the node.
const ciliumCNIConf = "/etc/cni/net.d/05-cilium.conflist"

func ciliumBinaries() []string {
	return []string{"cilium-agent", "cilium-cni", "cilium-operator", "hubble-relay", "hubble", "hubble-ui"}
}

// Hubble's mutual TLS between the agents' servers (:4244) and the relay,
// and between the relay (:4245) and the hubble CLI: a CA of its own, so
// that no other certificate of the lab opens them. Its files, named as
// Cilium's certificates: one wildcard server certificate for every node
// (<node>.default.hubble-grpc.cilium.io), the relay's client certificate
// towards them, the relay's server certificate (*.hubble-relay.cilium.io)
// and the CLI's client certificate (cli.crt, cli.key):
//
//	hubble observe --server tls://localhost:4245 --tls-server-name hubble.hubble-relay.cilium.io \
//	  --tls-ca-cert-files <state>/pki/hubble/ca.crt \
//	  --tls-client-cert-file <state>/pki/hubble/cli.crt --tls-client-key-file <state>/pki/hubble/cli.key
//
// on the first node (test/e2e and hack/demo.sh do so).
func hubbleTLSDir(p plan.Plan) string        { return filepath.Join(p.StateDir, "pki", "hubble") }
func hubbleTLS(p plan.Plan, f string) string { return filepath.Join(hubbleTLSDir(p), f) }

// labHubbleMetrics are Hubble's metrics in the lab: who talked to whom,
// by pod, in the drops and policy verdicts.
const labHubbleMetrics = "flow tcp port-distribution icmp drop:sourceContext=pod;destinationContext=pod " +
	"policy:sourceContext=pod;destinationContext=pod"

const (
	hubbleServerName = "*.default.hubble-grpc.cilium.io"
	relayServerName  = "*.hubble-relay.cilium.io"
	relayName        = "hubble-relay"
	// relayAddress is where the relay serves, in the first node.
	relayAddress = ":4245"
)

// ensureHubbleCerts writes (or keeps) the Hubble CA and certificates.
func ensureHubbleCerts(p plan.Plan) error {
	ca, err := pki.LoadOrCreateCA(hubbleTLSDir(p), "cilium-lab-"+p.Name+" hubble CA")
	if err != nil {
		return fmt.Errorf("hubble CA: %w", err)
	}
	for _, c := range []struct {
		name string
		req  pki.Request
	}{
		{"server", pki.Request{CommonName: hubbleServerName, DNSNames: []string{hubbleServerName}, Usage: pki.ServerAuth}},
		{"relay", pki.Request{CommonName: "*.hubble-relay.cilium.io", Usage: pki.ClientAuth}},
		{"relay-server", pki.Request{CommonName: relayServerName, DNSNames: []string{relayServerName}, Usage: pki.ServerAuth}},
		{"cli", pki.Request{CommonName: "*.hubble-cli.cilium.io", Usage: pki.ClientAuth}},
	} {
		if _, _, err := ca.Ensure(hubbleTLS(p, c.name+".crt"), hubbleTLS(p, c.name+".key"), c.req); err != nil {
			return fmt.Errorf("hubble %s certificate: %w", c.name, err)
		}
	}
	return nil
}

// relayProcess is hubble-relay, in the first node: it asks that node's
// agent for the nodes (the Peer service on its socket, Cilium's default)
// and dials each node's Hubble server with the relay's certificate. It
// serves only clients with a certificate of the Hubble CA.
func relayProcess(p plan.Plan, binDir string) proc.Spec {
	n := p.Nodes[0]
	return proc.Spec{
		Name: relayName,
		Path: filepath.Join(binDir, "hubble-relay"),
		Args: []string{"serve",
			"--listen-address=" + relayAddress,
			"--tls-hubble-client-cert-file=" + hubbleTLS(p, "relay.crt"),
			"--tls-hubble-client-key-file=" + hubbleTLS(p, "relay.key"),
			"--tls-hubble-server-ca-files=" + hubbleTLS(p, pki.CACertFile),
			"--tls-relay-server-cert-file=" + hubbleTLS(p, "relay-server.crt"),
			"--tls-relay-server-key-file=" + hubbleTLS(p, "relay-server.key"),
			"--tls-relay-client-ca-files=" + hubbleTLS(p, pki.CACertFile),
			// No kubelet probes it here.
			"--health-listen-address=",
			// A node that went away is asked again soon.
			"--retry-timeout=5s",
		},
		Namespaces: nodeNamespaces(n),
		LogFile:    filepath.Join(n.Dir, relayName+".log"),
		Cgroup:     n.Cgroup,
	}
}

// installCiliumCNI copies cilium-cni into every node's /opt/cni/bin.
func installCiliumCNI(p plan.Plan, binDir string) error {
	for _, n := range p.Nodes {
		if err := copyFile(filepath.Join(binDir, "cilium-cni"), filepath.Join(n.Dir, "opt-cni-bin", "cilium-cni"), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// rbacKinds are what the lab takes from install/kubernetes; the agent
// DaemonSet and operator Deployment are replaced by supervised processes.
var rbacKinds = []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// installRBAC reads the ServiceAccounts and RBAC objects of the YAML
// files directly in dir.
func installRBAC(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := apply.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, u := range objs {
			if slices.Contains(rbacKinds, u.GetKind()) {
				out = append(out, u)
			}
		}
	}
	var sas []string
	for _, u := range out {
		if u.GetKind() == "ServiceAccount" && u.GetNamespace() == ciliumNamespace {
			sas = append(sas, u.GetName())
		}
	}
	for _, want := range []string{agentSA, operatorSA} {
		if !slices.Contains(sas, want) {
			return nil, fmt.Errorf("%s: no ServiceAccount %s/%s", dir, ciliumNamespace, want)
		}
	}
	return out, nil
}

// tokenKubeconfig writes a kubeconfig for the ServiceAccount sa with a
// token from the TokenRequest API, bound to the Node named node if any.
func tokenKubeconfig(ctx context.Context, cs kubernetes.Interface, cp controlplane.Config, sa, node, path string) error {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr(int64(tokenSeconds)),
	}}
	if node != "" {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ciliumNamespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for %s/%s: %w", ciliumNamespace, sa, err)
	}
	ca, err := os.ReadFile(controlplane.CACert(cp))
	if err != nil {
		return err
	}
	user := "system:serviceaccount:" + ciliumNamespace + ":" + sa
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[controlplane.ClusterName] = &clientcmdapi.Cluster{Server: cp.ServerURL(), CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[controlplane.ClusterName] = &clientcmdapi.Context{Cluster: controlplane.ClusterName, AuthInfo: user}
	cfg.CurrentContext = controlplane.ClusterName
	return clientcmd.WriteToFile(*cfg, path)
}

func ptr[T any](v T) *T { return &v }

// operatorProcesses are the operator's replicas in the control plane: one
// leads, the other stands by. Each names itself by host and PID in the
// Lease, so a restarted leader is a new candidate, as a new pod would be.
func operatorProcesses(p plan.Plan, binDir string) []proc.Spec {
	var specs []proc.Spec
	for i := 1; i <= operatorReplicas; i++ {
		specs = append(specs, proc.Spec{
			Name: operatorName(i),
			Path: filepath.Join(binDir, "cilium-operator"),
			Args: []string{
				"--kubeconfig=" + operatorKubeconfig(p),
				"--cluster-pool-ipv4-cidr=" + p.ClusterCIDR.String(),
				"--cluster-pool-ipv4-mask-size=" + strconv.Itoa(p.NodeMask),
				// Both replicas share the control plane's network namespace.
				fmt.Sprintf("--operator-api-serve-addr=127.0.0.1:%d", 9233+i),
			},
			Namespaces: proc.Namespaces{Net: p.ControlPlaneNS},
			LogFile:    filepath.Join(p.ControlPlaneDir, operatorName(i)+".log"),
		})
	}
	return specs
}

// agentProcess is a node's cilium-agent. It runs in all of the node's
// namespaces, so its default paths (/var/run/cilium, /var/lib/cilium,
// /sys/fs/bpf, /etc/cni/net.d) are the node's own.
//
// Without kube-proxy the agent balances Services: in BPF from pods, at
// the socket for the node's own processes (the node's cgroup, never the
// machine's), and forwards around the node's stack, which no longer needs
// to see pod traffic for netfilter.
func agentProcess(p plan.Plan, n plan.Node, binDir string) proc.Spec {
	args := []string{
		"--kubeconfig=" + agentKubeconfig(n),
		"--k8s-node-name=" + n.Name,
		"--node-ipv4=" + n.IP.String(),
		"--uplink=" + n.Uplink,
		"--routing-mode=" + p.RoutingMode,
		"--write-cni-conf-when-ready=" + ciliumCNIConf,
		// Hubble on its default socket, the node's /var/run/cilium/hubble.sock,
		// and for the relay on Cilium's port, with mutual TLS.
		"--enable-hubble",
		"--hubble-listen-address=:4244",
		"--hubble-tls-cert-file=" + hubbleTLS(p, "server.crt"),
		"--hubble-tls-key-file=" + hubbleTLS(p, "server.key"),
		"--hubble-tls-client-ca-files=" + hubbleTLS(p, pki.CACertFile),
		// Hubble's metrics on Cilium's port, with who talked to whom.
		"--hubble-metrics-server=:9965",
		"--hubble-metrics=" + labHubbleMetrics,
	}
	if p.HubbleExport {
		args = append(args, "--hubble-export-file-path="+plan.HubbleExportFile)
	}
	if p.KubeProxy == "none" {
		args = append(args, "--kube-proxy-replacement=true", "--enable-host-legacy-routing=false")
		if n.Cgroup != "" {
			args = append(args, "--cgroup-root="+n.Cgroup)
		} else {
			args = append(args, "--bpf-lb-sock=false")
		}
	}
	return proc.Spec{
		Name:       agentName(n),
		Path:       filepath.Join(binDir, "cilium-agent"),
		Args:       args,
		Namespaces: nodeNamespaces(n),
		LogFile:    filepath.Join(n.Dir, "cilium-agent.log"),
		Cgroup:     n.Cgroup,
	}
}

// startCilium installs cilium-go's RBAC, then runs the operators and, as
// each node registers, that node's agent with a token bound to its Node.
func startCilium(ctx context.Context, cs kubernetes.Interface, applier *apply.Applier, sup *proc.Supervisor,
	p plan.Plan, cp controlplane.Config, binDir string, log *slog.Logger) error {
	objs, err := installRBAC(p.InstallDir)
	if err != nil {
		return err
	}
	if err := retry(ctx, func() error { return applier.ApplyObjects(ctx, objs) }); err != nil {
		return fmt.Errorf("cilium-go RBAC: %w", err)
	}
	if err := retry(ctx, func() error { return tokenKubeconfig(ctx, cs, cp, operatorSA, "", operatorKubeconfig(p)) }); err != nil {
		return err
	}
	for _, s := range operatorProcesses(p, binDir) {
		sup.Start(ctx, s, 10*time.Second)
	}
	sup.Start(ctx, relayProcess(p, binDir), 10*time.Second)
	for _, n := range p.Nodes {
		go func() {
			// The Node exists once the node agent registered it.
			err := retry(ctx, func() error { return tokenKubeconfig(ctx, cs, cp, agentSA, n.Name, agentKubeconfig(n)) })
			if err != nil {
				log.Error("cilium-agent credentials", "node", n.Name, "error", err)
				return
			}
			sup.Start(ctx, agentProcess(p, n, binDir), 30*time.Second)
		}()
	}
	return nil
}
