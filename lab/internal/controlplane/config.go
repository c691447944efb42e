// Package controlplane lays out the lab's control plane: the certificates, keys,
// kubeconfigs and configuration files of etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler (Prepare), the exact command lines that run them (Processes), the
// credentials of each node (NodeCredentials) and the RBAC the lab adds once the API
// is up (Bootstrap). It starts nothing itself: the supervisor runs the Specs.
package controlplane

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/cilium-go/cilium/lab/internal/proc"
)

// ClusterName names the cluster and the context in every kubeconfig.
const ClusterName = "cilium-lab"

// Secure ports of the controller manager and scheduler (their upstream defaults). Both
// listen on 127.0.0.1 inside the control-plane namespace and serve /healthz without
// authentication.
const (
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
)

// Config describes the control plane of one lab.
type Config struct {
	// Dir is <state>/control-plane: certificates, kubeconfigs, etcd data, the
	// service-account key and logs live here.
	Dir string
	// BinDir holds kube-apiserver, kube-controller-manager and kube-scheduler.
	BinDir string
	// LabBinary is bin/cilium-lab; its hidden `etcd` subcommand runs etcd.
	LabBinary string
	// AdvertiseIP is the control plane's underlay address, e.g. 172.30.0.2.
	AdvertiseIP netip.Addr
	// SecurePort is the API server's port, e.g. 6443.
	SecurePort int
	// ServiceCIDR is the Service range; its first address is the kubernetes Service.
	ServiceCIDR netip.Prefix
	// ClusterCIDR is the pod range the controller manager cuts node CIDRs from.
	ClusterCIDR      netip.Prefix
	NodeCIDRMaskSize int
	// AllocateNodeCIDRs makes the controller manager write each Node's
	// spec.podCIDR; off when the CNI's own IPAM (cilium-go's operator) owns
	// the pool, so that one pod range never has two allocators.
	AllocateNodeCIDRs bool
	// ExtraSANs are added to the API server's serving certificate: IP addresses
	// become IP SANs, anything else a DNS SAN. The user's kubectl reaches the API
	// through a forwarder on the host's 127.0.0.1.
	ExtraSANs []string
	// Namespaces is the control-plane machine; every process joins it.
	Namespaces proc.Namespaces
}

// Validate reports the first missing or inconsistent setting.
func (c Config) Validate() error {
	switch {
	case c.Dir == "" || !filepath.IsAbs(c.Dir):
		return fmt.Errorf("control plane: dir %q must be an absolute path", c.Dir)
	case !c.AdvertiseIP.Is4():
		return fmt.Errorf("control plane: advertise IP %v must be IPv4", c.AdvertiseIP)
	case c.SecurePort <= 0 || c.SecurePort > 65535:
		return fmt.Errorf("control plane: secure port %d out of range", c.SecurePort)
	case !c.ServiceCIDR.IsValid() || !c.ServiceCIDR.Addr().Is4():
		return fmt.Errorf("control plane: service CIDR %v must be an IPv4 prefix", c.ServiceCIDR)
	case !c.ClusterCIDR.IsValid() || !c.ClusterCIDR.Addr().Is4():
		return fmt.Errorf("control plane: cluster CIDR %v must be an IPv4 prefix", c.ClusterCIDR)
	case c.NodeCIDRMaskSize <= c.ClusterCIDR.Bits() || c.NodeCIDRMaskSize > 30:
		return fmt.Errorf("control plane: node CIDR mask /%d does not fit in cluster CIDR %v",
			c.NodeCIDRMaskSize, c.ClusterCIDR)
	case c.ServiceCIDR.Overlaps(c.ClusterCIDR):
		return fmt.Errorf("control plane: service CIDR %v overlaps cluster CIDR %v", c.ServiceCIDR, c.ClusterCIDR)
	}
	for _, s := range c.ExtraSANs {
		if strings.TrimSpace(s) == "" {
			return errors.New("control plane: empty extra SAN")
		}
	}
	return nil
}

// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service: the first
// address of the Service range.
func (c Config) KubernetesServiceIP() netip.Addr {
	return c.ServiceCIDR.Masked().Addr().Next()
}

// ServerURL is the API server URL as seen from the underlay (nodes and components).
func (c Config) ServerURL() string {
	return "https://" + netip.AddrPortFrom(c.AdvertiseIP, uint16(c.SecurePort)).String()
}

// HealthURLs maps each HTTP component to the URL that says it is healthy, as reached
// from inside the control-plane namespace. All are TLS with certificates of the lab
// CA. /readyz and /healthz are readable without credentials (the API server grants
// them to system:public-info-viewer; the others always allow them), so a prober
// needs only the CA. etcd is covered by the API server's readiness.
func HealthURLs(c Config) map[string]string {
	return map[string]string{
		"kube-apiserver":          c.ServerURL() + "/readyz",
		"kube-controller-manager": fmt.Sprintf("https://127.0.0.1:%d/healthz", ControllerManagerPort),
		"kube-scheduler":          fmt.Sprintf("https://127.0.0.1:%d/healthz", SchedulerPort),
	}
}

// layout holds every path under Config.Dir, so Prepare, Processes and the tests agree
// on one place.
type layout struct {
	pki, kubeconfigs, logs, nodes string

	caCert, caKey                       string
	apiserverCert, apiserverKey         string
	etcdClientCert, etcdClientKey       string
	kubeletClientCert, kubeletClientKey string
	etcdCert, etcdKey                   string
	kcmServingCert, kcmServingKey       string
	schedServingCert, schedServingKey   string
	saKey, saPub                        string
	frontProxyCA, frontProxyClient      string

	adminConf, kcmConf, schedConf string
	schedulerConfig               string
	etcdData                      string
}

func paths(c Config) layout {
	pki := filepath.Join(c.Dir, "pki")
	kc := filepath.Join(c.Dir, "kubeconfig")
	p := func(name string) string { return filepath.Join(pki, name) }
	return layout{
		pki: pki, kubeconfigs: kc,
		logs:  filepath.Join(c.Dir, "logs"),
		nodes: filepath.Join(c.Dir, "nodes"),

		caCert: p("ca.crt"), caKey: p("ca.key"),
		apiserverCert: p("apiserver.crt"), apiserverKey: p("apiserver.key"),
		etcdClientCert: p("apiserver-etcd-client.crt"), etcdClientKey: p("apiserver-etcd-client.key"),
		kubeletClientCert: p("apiserver-kubelet-client.crt"), kubeletClientKey: p("apiserver-kubelet-client.key"),
		etcdCert: p("etcd.crt"), etcdKey: p("etcd.key"),
		kcmServingCert: p("controller-manager-serving.crt"), kcmServingKey: p("controller-manager-serving.key"),
		schedServingCert: p("scheduler-serving.crt"), schedServingKey: p("scheduler-serving.key"),
		saKey: p("sa.key"), saPub: p("sa.pub"),
		frontProxyCA: filepath.Join(pki, "front-proxy"), frontProxyClient: p("front-proxy-client"),

		adminConf:       filepath.Join(kc, "admin.conf"),
		kcmConf:         filepath.Join(kc, "controller-manager.conf"),
		schedConf:       filepath.Join(kc, "scheduler.conf"),
		schedulerConfig: filepath.Join(c.Dir, "scheduler.yaml"),
		etcdData:        filepath.Join(c.Dir, "etcd"),
	}
}

// AdminKubeconfig is the path of the cluster-admin kubeconfig (server
// https://AdvertiseIP:SecurePort, usable inside the underlay).
func AdminKubeconfig(c Config) string { return paths(c).adminConf }

// CACert is the path of the lab CA certificate as the components read it.
func CACert(c Config) string { return paths(c).caCert }
