package controlplane

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/cilium-go/cilium/lab/internal/pki"
)

// NodeFiles are the credentials of one node, all under <Dir>/nodes/<node>/.
type NodeFiles struct {
	// CACert is the lab CA: node agents verify the API server with it and check
	// client certificates on their own server (the API server's kubelet client).
	CACert string
	// Kubeconfig authenticates as system:node:<node> in group system:nodes, the
	// identity the Node authorizer and NodeRestriction expect.
	Kubeconfig string
	// ClientCert and ClientKey are the same identity as separate files.
	ClientCert string
	ClientKey  string
	// ServingCert and ServingKey are the node agent's serving certificate (exec,
	// logs): SANs are the node name and its IP, which is what the API server dials
	// with --kubelet-preferred-address-types=InternalIP.
	ServingCert string
	ServingKey  string
	// KubeProxyKubeconfig authenticates as system:kube-proxy.
	KubeProxyKubeconfig string
}

// NodePaths returns where NodeCredentials puts the files of node, without writing
// anything: processes started later (the node agent, kube-proxy) take their flags
// from it.
func NodePaths(cfg Config, node string) NodeFiles {
	dir := filepath.Join(paths(cfg).nodes, node)
	return NodeFiles{
		CACert:              filepath.Join(dir, "ca.crt"),
		Kubeconfig:          filepath.Join(dir, "kubelet.conf"),
		ClientCert:          filepath.Join(dir, "node.crt"),
		ClientKey:           filepath.Join(dir, "node.key"),
		ServingCert:         filepath.Join(dir, "kubelet-serving.crt"),
		ServingKey:          filepath.Join(dir, "kubelet-serving.key"),
		KubeProxyKubeconfig: filepath.Join(dir, "kube-proxy.conf"),
	}
}

// NodeCredentials writes (idempotently) the certificates and kubeconfigs of node,
// whose underlay address is nodeIP, and returns their paths.
func NodeCredentials(cfg Config, ca *pki.CA, node string, nodeIP netip.Addr) (NodeFiles, error) {
	if node == "" || filepath.Base(node) != node {
		return NodeFiles{}, fmt.Errorf("node credentials: invalid node name %q", node)
	}
	if !nodeIP.IsValid() {
		return NodeFiles{}, fmt.Errorf("node credentials %s: invalid IP", node)
	}
	f := NodePaths(cfg, node)
	dir := filepath.Dir(f.CACert)
	if err := pki.WriteFile(f.CACert, ca.CertPEM(), 0o644); err != nil {
		return NodeFiles{}, err
	}
	nodeUser := "system:node:" + node
	nodeReq := pki.Request{CommonName: nodeUser, Organizations: []string{NodesGroup}, Usage: pki.ClientAuth}
	if err := writeKubeconfig(f.Kubeconfig, cfg.ServerURL(), ca, nodeReq, dir, "node"); err != nil {
		return NodeFiles{}, err
	}
	serving := pki.Request{
		CommonName: nodeUser, Organizations: []string{NodesGroup},
		DNSNames: []string{node}, IPs: []netip.Addr{nodeIP}, Usage: pki.ServerAuth,
	}
	if _, _, err := ca.Ensure(f.ServingCert, f.ServingKey, serving); err != nil {
		return NodeFiles{}, err
	}
	proxyReq := pki.Request{CommonName: KubeProxyUser, Usage: pki.ClientAuth}
	if err := writeKubeconfig(f.KubeProxyKubeconfig, cfg.ServerURL(), ca, proxyReq, dir, "kube-proxy"); err != nil {
		return NodeFiles{}, err
	}
	return f, nil
}
