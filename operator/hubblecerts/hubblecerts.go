// Package hubblecerts issues Hubble's certificates, as Cilium's certgen
// does, into Secrets the agents, hubble-relay and Hubble's clients
// mount: a CA (cilium-ca), the nodes' server certificate
// (hubble-server-certs, for *.<cluster>.hubble-grpc.cilium.io, every
// node's name), the relay's client certificate towards the nodes
// (hubble-relay-client-certs), the relay's server certificate
// (hubble-relay-server-certs, *.hubble-relay.cilium.io) and a client
// certificate for the hubble CLI towards the relay
// (hubble-cli-client-certs: Cilium has none, its users bring their own)
// and one for hubble-ui towards the relay (hubble-ui-client-certs,
// *.hubble-ui.cilium.io).
// Each leaf Secret holds ca.crt beside tls.crt and tls.key. What is
// missing, signed by another CA, for other names or within a third of
// its validity of expiring is issued again; a new CA reissues every leaf.
package hubblecerts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/leader"
)

// Cell keeps the certificates as a leader controller.
var Cell = cell.Module("hubble-certs", "Hubble CA and certificates in Secrets",
	cell.Config(DefaultConfig),
	cell.Invoke(Config.Validate),
	cell.Provide(newController),
)

// The Secrets, named as Cilium's but for the CLI's.
const (
	CASecret          = "cilium-ca"
	ServerSecret      = "hubble-server-certs"
	RelaySecret       = "hubble-relay-client-certs"
	RelayServerSecret = "hubble-relay-server-certs"
	CLISecret         = "hubble-cli-client-certs"
	UISecret          = "hubble-ui-client-certs"
)

// Config has the controller's flags.
type Config struct {
	HubbleTLSAuto     bool          `mapstructure:"hubble-tls-auto"`
	HubbleTLSValidity time.Duration `mapstructure:"hubble-tls-cert-validity"`
	HubbleTLSNS       string        `mapstructure:"hubble-tls-namespace"`
	ClusterName       string        `mapstructure:"cluster-name"`
}

// DefaultConfig: on, certificates of a year (Cilium's certgen), in
// kube-system, for the cluster "default".
var DefaultConfig = Config{HubbleTLSAuto: true, HubbleTLSValidity: 365 * 24 * time.Hour, HubbleTLSNS: "kube-system", ClusterName: "default"}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("hubble-tls-auto", d.HubbleTLSAuto, "issue and renew Hubble's CA and certificates in Secrets (cilium-ca, hubble-server-certs, hubble-relay-client-certs, hubble-relay-server-certs, hubble-cli-client-certs, hubble-ui-client-certs)")
	fs.Duration("hubble-tls-cert-validity", d.HubbleTLSValidity, "how long Hubble's certificates are valid; they are renewed with a third of it left")
	fs.String("hubble-tls-namespace", d.HubbleTLSNS, "namespace of Hubble's Secrets")
	fs.String("cluster-name", d.ClusterName, "the cluster's name, in the names of the Hubble servers' certificates")
}

// Validate names the bad flag.
func (c Config) Validate() error {
	switch {
	case !c.HubbleTLSAuto:
		return nil
	case c.HubbleTLSValidity < time.Hour:
		return fmt.Errorf("--hubble-tls-cert-validity %s: want an hour or more", c.HubbleTLSValidity)
	case c.HubbleTLSNS == "":
		return errors.New("--hubble-tls-namespace: required")
	case c.ClusterName == "":
		return errors.New("--cluster-name: required")
	}
	return nil
}

// recheck is how often the certificates are looked at again.
const recheck = time.Hour

func newController(cfg Config, c k8s.Clients, log *slog.Logger) leader.Out {
	return leader.Out{Controller: leader.Controller{Name: "hubble-certs", Run: func(ctx context.Context) error {
		for cfg.HubbleTLSAuto {
			if err := Reconcile(ctx, c.Kube, cfg, time.Now()); err != nil {
				log.Error("Hubble's certificates", "error", err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(recheck):
			}
		}
		<-ctx.Done()
		return nil
	}}}
}

// leafs are the certificates the CA signs.
func (c Config) leafs() []leaf {
	wildcard := "*." + dashes(c.ClusterName) + ".hubble-grpc.cilium.io"
	return []leaf{
		{secret: ServerSecret, name: wildcard, usage: x509.ExtKeyUsageServerAuth},
		{secret: RelaySecret, name: "*.hubble-relay.cilium.io", usage: x509.ExtKeyUsageClientAuth},
		// The relay's clients verify it as hubble.hubble-relay.cilium.io
		// (Hubble's --tls-server-name).
		{secret: RelayServerSecret, name: "*.hubble-relay.cilium.io", usage: x509.ExtKeyUsageServerAuth},
		{secret: CLISecret, name: "*.hubble-cli.cilium.io", usage: x509.ExtKeyUsageClientAuth},
		{secret: UISecret, name: "*.hubble-ui.cilium.io", usage: x509.ExtKeyUsageClientAuth},
	}
}

// Secrets names every Secret Reconcile writes, for the operator's RBAC.
func Secrets() []string {
	out := []string{CASecret}
	for _, l := range DefaultConfig.leafs() {
		out = append(out, l.secret)
	}
	return out
}

type leaf struct {
	secret, name string
	usage        x509.ExtKeyUsage
}

func dashes(s string) string { return string(bytes.ReplaceAll([]byte(s), []byte("."), []byte("-"))) }

// Reconcile makes the Secrets hold valid certificates at now.
func Reconcile(ctx context.Context, kube kubernetes.Interface, cfg Config, now time.Time) error {
	secrets := kube.CoreV1().Secrets(cfg.HubbleTLSNS)
	renewBefore := cfg.HubbleTLSValidity / 3
	ca, caKey, err := loadCA(ctx, secrets.Get)
	if err != nil || ca.NotAfter.Before(now.Add(renewBefore)) {
		ca, caKey, err = newCA(cfg, now)
		if err != nil {
			return err
		}
		if err := put(ctx, kube, cfg.HubbleTLSNS, CASecret, corev1.SecretTypeOpaque, map[string][]byte{
			"ca.crt": pemCert(ca.Raw), "ca.key": pemKey(caKey)}); err != nil {
			return err
		}
	}
	for _, l := range cfg.leafs() {
		s, err := secrets.Get(ctx, l.secret, metav1.GetOptions{})
		if err == nil && leafValid(s, ca, l, now.Add(renewBefore)) {
			continue
		}
		if err != nil && !k8serrors.IsNotFound(err) {
			return fmt.Errorf("secret %s: %w", l.secret, err)
		}
		certPEM, keyPEM, err := issue(ca, caKey, l, cfg.HubbleTLSValidity, now)
		if err != nil {
			return err
		}
		if err := put(ctx, kube, cfg.HubbleTLSNS, l.secret, corev1.SecretTypeTLS, map[string][]byte{
			"ca.crt": pemCert(ca.Raw), corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}); err != nil {
			return err
		}
	}
	return nil
}

func loadCA(ctx context.Context, get func(context.Context, string, metav1.GetOptions) (*corev1.Secret, error)) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	s, err := get(ctx, CASecret, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(s.Data["ca.crt"], s.Data["ca.key"])
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !pair.Leaf.IsCA {
		return nil, nil, errors.New("not an ECDSA CA")
	}
	return pair.Leaf, key, nil
}

// leafValid says that s holds l's certificate, signed by ca, its key,
// and ca.crt, valid past renewAt.
func leafValid(s *corev1.Secret, ca *x509.Certificate, l leaf, renewAt time.Time) bool {
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil || !bytes.Equal(s.Data["ca.crt"], pemCert(ca.Raw)) {
		return false
	}
	c := pair.Leaf
	return c.CheckSignatureFrom(ca) == nil && c.NotAfter.After(renewAt) && c.Subject.CommonName == l.name &&
		slices.Equal(c.DNSNames, []string{l.name}) && slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{l.usage})
}

func newCA(cfg Config, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "Cilium CA", Organization: []string{cfg.ClusterName}},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(cfg.HubbleTLSValidity)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, l leaf, validity time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	// A leaf outlives its CA by nothing.
	notAfter := now.Add(validity)
	if ca.NotAfter.Before(notAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: l.name}, DNSNames: []string{l.name},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{l.usage},
		NotBefore: now.Add(-time.Minute), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	return pemCert(der), pemKey(key), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func pemKey(k *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// put creates or replaces the Secret's data.
func put(ctx context.Context, kube kubernetes.Interface, ns, name string, typ corev1.SecretType, data map[string][]byte) error {
	secrets := kube.CoreV1().Secrets(ns)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{"app.kubernetes.io/part-of": "cilium-go"}}, Type: typ, Data: data}
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	if k8serrors.IsAlreadyExists(err) {
		var cur *corev1.Secret
		if cur, err = secrets.Get(ctx, name, metav1.GetOptions{}); err == nil {
			if cur.Type != typ {
				return fmt.Errorf("secret %s/%s is of type %s, not %s: delete it to let the operator issue it", ns, name, cur.Type, typ)
			}
			cur.Data = data
			_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	return nil
}
