package hubblecerts

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func secret(t *testing.T, kube *fake.Clientset, name string) *corev1.Secret {
	t.Helper()
	s, err := kube.CoreV1().Secrets("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func parse(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verify checks that secret's certificate is for name and usage under
// the CA the secret carries, at now.
func verify(t *testing.T, s *corev1.Secret, name string, usage x509.ExtKeyUsage, now time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(parse(t, s.Data["ca.crt"]))
	_, err := parse(t, s.Data[corev1.TLSCertKey]).Verify(x509.VerifyOptions{DNSName: name, Roots: pool,
		KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now})
	if err != nil {
		t.Errorf("%s for %s: %v", s.Name, name, err)
	}
}

func TestReconcileIssuesAndRenews(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	cfg := DefaultConfig
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if err := Reconcile(ctx, kube, cfg, now); err != nil {
		t.Fatal(err)
	}
	server, relay := secret(t, kube, ServerSecret), secret(t, kube, RelaySecret)
	if server.Type != corev1.SecretTypeTLS {
		t.Errorf("server secret type %s", server.Type)
	}
	verify(t, server, "node1.default.hubble-grpc.cilium.io", x509.ExtKeyUsageServerAuth, now)
	verify(t, relay, "x.hubble-relay.cilium.io", x509.ExtKeyUsageClientAuth, now)
	// The relay's own server, and the CLI's certificate towards it.
	verify(t, secret(t, kube, RelayServerSecret), "hubble.hubble-relay.cilium.io", x509.ExtKeyUsageServerAuth, now)
	verify(t, secret(t, kube, CLISecret), "x.hubble-cli.cilium.io", x509.ExtKeyUsageClientAuth, now)
	verify(t, secret(t, kube, UISecret), "x.hubble-ui.cilium.io", x509.ExtKeyUsageClientAuth, now)
	ca := secret(t, kube, CASecret).Data["ca.crt"]

	// Nothing changes while they are good.
	if err := Reconcile(ctx, kube, cfg, now.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := secret(t, kube, ServerSecret).Data[corev1.TLSCertKey]; string(got) != string(server.Data[corev1.TLSCertKey]) {
		t.Error("the server certificate was issued again while valid")
	}

	// A leaf another CA signed is replaced.
	other := fake.NewClientset()
	if err := Reconcile(ctx, other, cfg, now); err != nil {
		t.Fatal(err)
	}
	forged := secret(t, other, ServerSecret)
	forged.Namespace, forged.ResourceVersion = "kube-system", ""
	forged.Data["ca.crt"] = ca
	if _, err := kube.CoreV1().Secrets("kube-system").Update(ctx, forged, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Reconcile(ctx, kube, cfg, now); err != nil {
		t.Fatal(err)
	}
	verify(t, secret(t, kube, ServerSecret), "node1.default.hubble-grpc.cilium.io", x509.ExtKeyUsageServerAuth, now)
	if got := secret(t, kube, ServerSecret).Data[corev1.TLSCertKey]; string(got) == string(forged.Data[corev1.TLSCertKey]) {
		t.Error("a certificate of another CA was kept")
	}

	// With less than a third of its validity left, the CA and every
	// leaf are new.
	later := now.Add(cfg.HubbleTLSValidity * 7 / 10)
	if err := Reconcile(ctx, kube, cfg, later); err != nil {
		t.Fatal(err)
	}
	if string(secret(t, kube, CASecret).Data["ca.crt"]) == string(ca) {
		t.Error("the CA was not renewed")
	}
	verify(t, secret(t, kube, ServerSecret), "node1.default.hubble-grpc.cilium.io", x509.ExtKeyUsageServerAuth, later.Add(cfg.HubbleTLSValidity/2))
	verify(t, secret(t, kube, RelaySecret), "x.hubble-relay.cilium.io", x509.ExtKeyUsageClientAuth, later.Add(cfg.HubbleTLSValidity/2))
	verify(t, secret(t, kube, RelayServerSecret), "hubble.hubble-relay.cilium.io", x509.ExtKeyUsageServerAuth, later.Add(cfg.HubbleTLSValidity/2))
	verify(t, secret(t, kube, CLISecret), "x.hubble-cli.cilium.io", x509.ExtKeyUsageClientAuth, later.Add(cfg.HubbleTLSValidity/2))
	verify(t, secret(t, kube, UISecret), "x.hubble-ui.cilium.io", x509.ExtKeyUsageClientAuth, later.Add(cfg.HubbleTLSValidity/2))

	// Another cluster name is in the server certificate's name.
	named := cfg
	named.ClusterName = "prod.eu"
	if err := Reconcile(ctx, kube, named, later); err != nil {
		t.Fatal(err)
	}
	verify(t, secret(t, kube, ServerSecret), "node1.prod-eu.hubble-grpc.cilium.io", x509.ExtKeyUsageServerAuth, later)
}

func TestReconcileLeavesForeignSecretsAlone(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ServerSecret, Namespace: "kube-system"},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"something": []byte("else")}})
	err := Reconcile(ctx, kube, DefaultConfig, time.Now())
	if err == nil || !strings.Contains(err.Error(), "kube-system/hubble-server-certs is of type Opaque") {
		t.Fatalf("got %v, want an error naming the secret", err)
	}
	if got := secret(t, kube, ServerSecret).Data["something"]; string(got) != "else" {
		t.Error("the foreign secret was changed")
	}
}

func TestConfigNamesTheFlag(t *testing.T) {
	for flag, tweak := range map[string]func(*Config){
		"--hubble-tls-cert-validity": func(c *Config) { c.HubbleTLSValidity = time.Minute },
		"--hubble-tls-namespace":     func(c *Config) { c.HubbleTLSNS = "" },
		"--cluster-name":             func(c *Config) { c.ClusterName = "" },
	} {
		c := DefaultConfig
		tweak(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), flag) {
			t.Errorf("%s: %v", flag, err)
		}
	}
}
