package controlplane

import (
	"bytes"
	"crypto/x509"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/cilium-go/cilium/lab/internal/etcd"
	"github.com/cilium-go/cilium/lab/internal/pki"
	"github.com/cilium-go/cilium/lab/internal/proc"
)

func testConfig(dir string) Config {
	return Config{
		Dir:               dir,
		BinDir:            "/opt/lab/bin",
		LabBinary:         "/opt/lab/bin/cilium-lab",
		AdvertiseIP:       netip.MustParseAddr("172.30.0.2"),
		SecurePort:        6443,
		ServiceCIDR:       netip.MustParsePrefix("10.96.0.0/16"),
		ClusterCIDR:       netip.MustParsePrefix("10.244.0.0/16"),
		NodeCIDRMaskSize:  24,
		AllocateNodeCIDRs: true,
		ExtraSANs:         []string{"127.0.0.1", "lab.example"},
		Namespaces:        proc.Namespaces{Net: "/run/netns/lab-cp"},
	}
}

func prepared(t *testing.T) (Config, *pki.CA) {
	t.Helper()
	cfg := testConfig(t.TempDir())
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := Prepare(cfg, ca); err != nil {
		t.Fatal(err)
	}
	return cfg, ca
}

// flagValues turns ["--a=1", "--b=2"] into {a: [1], b: [2]}.
func flagValues(t *testing.T, args []string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Fatalf("argument %q is not --flag=value", a)
		}
		m[name] = append(m[name], value)
	}
	return m
}

func TestProcessesCommandLines(t *testing.T) {
	cfg, _ := prepared(t)
	l := paths(cfg)
	specs := Processes(cfg)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if want := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}; !slices.Equal(names, want) {
		t.Fatalf("processes %v, want %v", names, want)
	}

	tests := []struct {
		name string
		path string
		want map[string]string // flag -> exact value
	}{
		{"kube-apiserver", "/opt/lab/bin/kube-apiserver", map[string]string{
			"authorization-mode":               "Node,RBAC",
			"enable-admission-plugins":         "NodeRestriction",
			"advertise-address":                "172.30.0.2",
			"secure-port":                      "6443",
			"etcd-servers":                     "https://127.0.0.1:2379",
			"client-ca-file":                   l.caCert,
			"tls-cert-file":                    l.apiserverCert,
			"service-account-issuer":           serviceAccountIssuer,
			"service-account-signing-key-file": l.saKey,
			"service-account-key-file":         l.saPub,
			"service-cluster-ip-range":         "10.96.0.0/16",
			"kubelet-client-certificate":       l.kubeletClientCert,
			"kubelet-certificate-authority":    l.caCert,
			"kubelet-preferred-address-types":  "InternalIP",
			"requestheader-allowed-names":      frontProxyClientName,
			"requestheader-client-ca-file":     filepath.Join(l.frontProxyCA, pki.CACertFile),
			"profiling":                        "false",
		}},
		{"kube-controller-manager", "/opt/lab/bin/kube-controller-manager", map[string]string{
			"kubeconfig":                       l.kcmConf,
			"allocate-node-cidrs":              "true",
			"cluster-cidr":                     "10.244.0.0/16",
			"node-cidr-mask-size":              "24",
			"service-cluster-ip-range":         "10.96.0.0/16",
			"use-service-account-credentials":  "true",
			"root-ca-file":                     l.caCert,
			"service-account-private-key-file": l.saKey,
			"controllers":                      "*",
			"bind-address":                     "127.0.0.1",
			"profiling":                        "false",
		}},
		{"kube-scheduler", "/opt/lab/bin/kube-scheduler", map[string]string{
			"config":       l.schedulerConfig,
			"bind-address": "127.0.0.1",
		}},
		{"etcd", "/opt/lab/bin/cilium-lab", map[string]string{
			"client-addr": "127.0.0.1:2379",
			"peer-addr":   "127.0.0.1:2380",
			"cert":        l.etcdCert,
			"ca":          l.caCert,
			"data-dir":    l.etcdData,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i := slices.IndexFunc(specs, func(s proc.Spec) bool { return s.Name == tc.name })
			s := specs[i]
			if s.Path != tc.path {
				t.Errorf("path %q, want %q", s.Path, tc.path)
			}
			if s.Namespaces != cfg.Namespaces {
				t.Errorf("namespaces %+v, want %+v", s.Namespaces, cfg.Namespaces)
			}
			if s.LogFile == "" {
				t.Error("no log file")
			}
			args := s.Args
			if tc.name == "etcd" {
				if args[0] != "etcd" {
					t.Fatalf("etcd runs subcommand %q", args[0])
				}
				args = args[1:]
			}
			flags := flagValues(t, args)
			for name, want := range tc.want {
				if got := flags[name]; !slices.Equal(got, []string{want}) {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
			for name, values := range flags {
				for _, v := range values {
					if strings.Contains(v, "AlwaysAllow") || strings.Contains(v, "AlwaysAdmit") {
						t.Errorf("--%s=%s: the lab never allows everything", name, v)
					}
					// Every file a component is pointed at exists after Prepare.
					if strings.HasPrefix(v, cfg.Dir) && name != "data-dir" {
						if _, err := os.Stat(v); err != nil {
							t.Errorf("--%s: %v", name, err)
						}
					}
				}
				if name == "insecure-port" || name == "anonymous-auth" && values[0] == "true" {
					t.Errorf("--%s=%v weakens authentication", name, values)
				}
			}
		})
	}
}

// The etcd command line must parse back, through the flags the CLI registers, into
// the configuration the control plane meant.
func TestEtcdArgsRoundTrip(t *testing.T) {
	cfg := testConfig(t.TempDir())
	want := etcdConfig(cfg)
	var got etcd.Config
	fs := pflag.NewFlagSet("etcd", pflag.ContinueOnError)
	got.Flags(fs)
	if err := fs.Parse(Processes(cfg)[0].Args[1:]); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
}

func TestPrepareCertificates(t *testing.T) {
	cfg, ca := prepared(t)
	l := paths(cfg)

	apiserver, err := pki.LoadCert(l.apiserverCert)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Verify(apiserver, x509.ExtKeyUsageServerAuth); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"10.96.0.1", "172.30.0.2", "127.0.0.1", "kubernetes.default.svc", "lab.example", "localhost"} {
		if err := apiserver.VerifyHostname(host); err != nil {
			t.Errorf("API server certificate: %v", err)
		}
	}

	// The front proxy's client certificate is trusted through its own CA only, so
	// no ordinary client certificate can assert users in request headers.
	fpCA, err := pki.LoadCA(l.frontProxyCA)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pki.LoadCert(l.frontProxyClient + ".crt")
	if err != nil {
		t.Fatal(err)
	}
	if err := fpCA.Verify(fp, x509.ExtKeyUsageClientAuth); err != nil {
		t.Error(err)
	}
	if err := ca.Verify(fp, x509.ExtKeyUsageClientAuth); err == nil {
		t.Error("front-proxy client certificate verifies with the cluster CA")
	}

	clients := map[string]struct{ path, user, group string }{
		"admin":              {l.adminConf, AdminUser, "system:masters"},
		"controller-manager": {l.kcmConf, ControllerManagerUser, ""},
		"scheduler":          {l.schedConf, SchedulerUser, ""},
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			checkKubeconfig(t, ca, c.path, cfg.ServerURL(), c.user, c.group)
		})
	}
	if AdminKubeconfig(cfg) != l.adminConf {
		t.Errorf("AdminKubeconfig = %s, want %s", AdminKubeconfig(cfg), l.adminConf)
	}

	for _, key := range []string{l.caKey, l.saKey, l.apiserverKey, l.etcdKey} {
		st, err := os.Stat(key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; keys must be private", key, st.Mode().Perm())
		}
	}

	data, err := os.ReadFile(l.schedulerConfig)
	if err != nil {
		t.Fatal(err)
	}
	var sc schedv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(data, &sc); err != nil {
		t.Fatalf("scheduler config: %v", err)
	}
	if sc.ClientConnection.Kubeconfig != l.schedConf || sc.LeaderElection.LeaderElect == nil || *sc.LeaderElection.LeaderElect {
		t.Errorf("scheduler config: kubeconfig %q, leader election %v", sc.ClientConnection.Kubeconfig, sc.LeaderElection.LeaderElect)
	}
}

// checkKubeconfig loads a kubeconfig through client-go and checks server, CA and
// the identity of its client certificate.
func checkKubeconfig(t *testing.T, ca *pki.CA, path, server, user, group string) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != server {
		t.Errorf("%s: server %q, want %q", path, rc.Host, server)
	}
	if !bytes.Equal(rc.CAData, ca.CertPEM()) {
		t.Errorf("%s: CA is not the lab CA", path)
	}
	cert, err := pki.ParseCertPEM(rc.CertData)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Verify(cert, x509.ExtKeyUsageClientAuth); err != nil {
		t.Error(err)
	}
	var groups []string
	if group != "" {
		groups = []string{group}
	}
	if cert.Subject.CommonName != user || !slices.Equal(cert.Subject.Organization, groups) {
		t.Errorf("%s: identity %q %v, want %q %v", path, cert.Subject.CommonName, cert.Subject.Organization, user, groups)
	}
}

func TestPrepareIsIdempotent(t *testing.T) {
	cfg, ca := prepared(t)
	l := paths(cfg)
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	files := []string{l.adminConf, l.kcmConf, l.apiserverCert, l.etcdCert, l.saKey, l.saPub}
	before := map[string][]byte{}
	for _, f := range files {
		before[f] = read(f)
	}
	if err := Prepare(cfg, ca); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !bytes.Equal(before[f], read(f)) {
			t.Errorf("%s changed on a second Prepare", filepath.Base(f))
		}
	}

	// A new SAN reissues the serving certificate and nothing that does not depend on it.
	cfg.ExtraSANs = append(cfg.ExtraSANs, "192.0.2.7")
	if err := Prepare(cfg, ca); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before[l.apiserverCert], read(l.apiserverCert)) {
		t.Error("API server certificate kept after its SANs changed")
	}
	if !bytes.Equal(before[l.adminConf], read(l.adminConf)) {
		t.Error("admin kubeconfig changed although its identity did not")
	}
}

func TestNodeCredentials(t *testing.T) {
	cfg, ca := prepared(t)
	ip := netip.MustParseAddr("172.30.0.11")
	f, err := NodeCredentials(cfg, ca, "lab-node1", ip)
	if err != nil {
		t.Fatal(err)
	}
	checkKubeconfig(t, ca, f.Kubeconfig, cfg.ServerURL(), "system:node:lab-node1", NodesGroup)
	checkKubeconfig(t, ca, f.KubeProxyKubeconfig, cfg.ServerURL(), KubeProxyUser, "")

	client, err := pki.LoadKeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	if client.Cert.Subject.CommonName != "system:node:lab-node1" {
		t.Errorf("client certificate CN %q", client.Cert.Subject.CommonName)
	}
	serving, err := pki.LoadKeyPair(f.ServingCert, f.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Verify(serving.Cert, x509.ExtKeyUsageServerAuth); err != nil {
		t.Error(err)
	}
	for _, host := range []string{"172.30.0.11", "lab-node1"} {
		if err := serving.Cert.VerifyHostname(host); err != nil {
			t.Errorf("serving certificate: %v", err)
		}
	}
	caCert, err := pki.LoadCert(f.CACert)
	if err != nil || !caCert.Equal(ca.Cert) {
		t.Errorf("node CA file: %v", err)
	}

	again, err := NodeCredentials(cfg, ca, "lab-node1", ip)
	if err != nil {
		t.Fatal(err)
	}
	if again != f || NodePaths(cfg, "lab-node1") != f {
		t.Errorf("paths changed: %+v vs %+v", again, f)
	}
	if _, err := NodeCredentials(cfg, ca, "../x", ip); err == nil {
		t.Error("node name with a path separator accepted")
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]func(*Config){
		"relative dir":      func(c *Config) { c.Dir = "state" },
		"no advertise ip":   func(c *Config) { c.AdvertiseIP = netip.Addr{} },
		"bad port":          func(c *Config) { c.SecurePort = 0 },
		"overlap":           func(c *Config) { c.ServiceCIDR = netip.MustParsePrefix("10.244.128.0/20") },
		"mask too small":    func(c *Config) { c.NodeCIDRMaskSize = 16 },
		"empty extra SAN":   func(c *Config) { c.ExtraSANs = []string{""} },
		"no service prefix": func(c *Config) { c.ServiceCIDR = netip.Prefix{} },
	}
	if err := testConfig("/state").Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			c := testConfig("/state")
			change(&c)
			if err := c.Validate(); err == nil {
				t.Error("accepted")
			}
		})
	}
}
