package controlplane

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium-go/cilium/lab/internal/kubeconfig"
	"github.com/cilium-go/cilium/lab/internal/pki"
)

// User names of the control plane's client certificates. The controller manager,
// scheduler and kube-proxy names are the ones the API server's default RBAC policy
// binds; the others are bound by Bootstrap or by their group.
const (
	// AdminUser is in system:masters: the lab's user is cluster-admin, as with kind.
	AdminUser = "cilium-lab-admin"
	// KubeletClientUser is how the API server authenticates to node agents (exec,
	// logs, port-forward). Bootstrap binds it to system:kubelet-api-admin rather than
	// making it a master.
	KubeletClientUser     = "kube-apiserver-kubelet-client"
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
	KubeProxyUser         = "system:kube-proxy"
	// NodesGroup holds every node identity system:node:<name>.
	NodesGroup = "system:nodes"
)

// Prepare writes every file the control plane needs into cfg.Dir: the CA as the
// components read it, serving and client certificates, the service-account signing
// key, kubeconfigs and the scheduler's configuration. It is idempotent: files that
// are still right are kept (so restarting the lab does not invalidate tokens or
// kubeconfigs already handed out), anything missing or stale is rewritten.
func Prepare(cfg Config, ca *pki.CA) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l := paths(cfg)
	for _, dir := range []string{l.logs, l.etcdData} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	// The controller manager signs CertificateSigningRequests with the CA key, so
	// it gets the key as well as the certificate.
	if err := ca.Save(l.pki); err != nil {
		return err
	}
	if _, err := pki.EnsureSigningKey(l.saKey, l.saPub); err != nil {
		return err
	}
	if err := prepareFrontProxy(l); err != nil {
		return err
	}
	for _, c := range certificates(cfg, l) {
		if _, _, err := ca.Ensure(c.cert, c.key, c.req); err != nil {
			return err
		}
	}
	for _, k := range kubeconfigs(cfg, l) {
		if err := writeKubeconfig(k.path, cfg.ServerURL(), ca, k.req, l.pki, k.name); err != nil {
			return err
		}
	}
	return pki.WriteFile(l.schedulerConfig, schedulerConfig(l.schedConf), 0o644)
}

// frontProxyClientName is the only common name the API server accepts as an
// authenticating proxy (--requestheader-allowed-names).
const frontProxyClientName = "front-proxy-client"

// prepareFrontProxy creates the aggregation layer's trust: a CA of its own, separate
// from the cluster CA, because any certificate it signs may assert a user in request
// headers; and the client certificate the API server presents when it proxies to an
// aggregated API server (metrics-server and the like). Without it the
// extension-apiserver-authentication ConfigMap has no request-header CA and every
// component with delegated authentication keeps logging about it.
func prepareFrontProxy(l layout) error {
	ca, err := pki.LoadOrCreateCA(l.frontProxyCA, "cilium-lab front-proxy CA")
	if err != nil {
		return err
	}
	_, _, err = ca.Ensure(l.frontProxyClient+".crt", l.frontProxyClient+".key",
		pki.Request{CommonName: frontProxyClientName, Usage: pki.ClientAuth})
	return err
}

type certFile struct {
	cert, key string
	req       pki.Request
}

// certificates lists the control plane's key pairs that are files of their own.
// Client certificates that only live inside a kubeconfig are in kubeconfigs.
func certificates(cfg Config, l layout) []certFile {
	loopback := netip.MustParseAddr("127.0.0.1")
	dns, ips := apiserverSANs(cfg)
	return []certFile{
		{l.apiserverCert, l.apiserverKey, pki.Request{
			CommonName: "kube-apiserver", DNSNames: dns, IPs: ips, Usage: pki.ServerAuth,
		}},
		{l.etcdClientCert, l.etcdClientKey, pki.Request{
			CommonName: "kube-apiserver-etcd-client", Usage: pki.ClientAuth,
		}},
		{l.kubeletClientCert, l.kubeletClientKey, pki.Request{
			CommonName: KubeletClientUser, Usage: pki.ClientAuth,
		}},
		// etcd presents the same certificate to clients and to peers, so it needs
		// both usages.
		{l.etcdCert, l.etcdKey, pki.Request{
			CommonName: "etcd", DNSNames: []string{"localhost"},
			IPs: uniqueAddrs(loopback, etcdConfig(cfg).ClientAddr.Addr()), Usage: pki.ServerAuth | pki.ClientAuth,
		}},
		{l.kcmServingCert, l.kcmServingKey, pki.Request{
			CommonName: "kube-controller-manager", DNSNames: []string{"localhost"},
			IPs: []netip.Addr{loopback}, Usage: pki.ServerAuth,
		}},
		{l.schedServingCert, l.schedServingKey, pki.Request{
			CommonName: "kube-scheduler", DNSNames: []string{"localhost"},
			IPs: []netip.Addr{loopback}, Usage: pki.ServerAuth,
		}},
	}
}

// apiserverSANs are the names under which pods (the kubernetes Service), nodes (the
// advertise address), the control plane itself (loopback) and the user (ExtraSANs)
// reach the API server.
func apiserverSANs(cfg Config) ([]string, []netip.Addr) {
	dns := []string{
		"kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "localhost",
	}
	ips := []netip.Addr{cfg.KubernetesServiceIP(), cfg.AdvertiseIP, netip.MustParseAddr("127.0.0.1")}
	for _, s := range cfg.ExtraSANs {
		if ip, err := netip.ParseAddr(s); err == nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, s)
		}
	}
	slices.Sort(dns)
	return slices.Compact(dns), uniqueAddrs(ips...)
}

func uniqueAddrs(addrs ...netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

type kubeconfigFile struct {
	path, name string
	req        pki.Request
}

func kubeconfigs(cfg Config, l layout) []kubeconfigFile {
	client := func(user string, groups ...string) pki.Request {
		return pki.Request{CommonName: user, Organizations: groups, Usage: pki.ClientAuth}
	}
	return []kubeconfigFile{
		{l.adminConf, "admin", client(AdminUser, "system:masters")},
		{l.kcmConf, "controller-manager", client(ControllerManagerUser)},
		{l.schedConf, "scheduler", client(SchedulerUser)},
	}
}

// writeKubeconfig keeps the client certificate next to the kubeconfig in certDir
// (as <name>.crt/.key) so that an unchanged identity keeps its certificate across
// Prepare calls, then writes the kubeconfig with everything embedded.
func writeKubeconfig(path, server string, ca *pki.CA, req pki.Request, certDir, name string) error {
	kp, _, err := ca.Ensure(filepath.Join(certDir, name+".crt"), filepath.Join(certDir, name+".key"), req)
	if err != nil {
		return err
	}
	spec, err := kubeconfig.ForKeyPair(ClusterName, server, ca, kp)
	if err != nil {
		return err
	}
	return kubeconfig.Write(path, spec)
}

// WriteAdminKubeconfig writes a copy of the admin kubeconfig that points at server,
// e.g. https://127.0.0.1:<port> for the forwarder the user's kubectl goes through.
// The serving certificate must cover server's host (see Config.ExtraSANs).
func WriteAdminKubeconfig(cfg Config, ca *pki.CA, path, server string) error {
	l := paths(cfg)
	return writeKubeconfig(path, server, ca, kubeconfigs(cfg, l)[0].req, l.pki, "admin")
}

// schedulerConfig is the KubeSchedulerConfiguration. Leader election is off: there
// is one scheduler, and without it a restarted scheduler schedules at once instead
// of waiting for its predecessor's lease to expire.
func schedulerConfig(kubeconfigPath string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
enableProfiling: false
enableContentionProfiling: false
`, kubeconfigPath)
}
