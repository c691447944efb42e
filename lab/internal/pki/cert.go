package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// Usage says what a certificate is for. Combine with |.
type Usage int

const (
	// ServerAuth certificates are presented by TLS servers.
	ServerAuth Usage = 1 << iota
	// ClientAuth certificates authenticate TLS clients; Kubernetes takes the user
	// from the CommonName and the groups from the Organizations.
	ClientAuth
)

// DefaultValidity is how long issued certificates live unless a Request says otherwise.
const DefaultValidity = 365 * 24 * time.Hour

// renewBefore is how close to expiry a certificate may get before Ensure replaces it.
const renewBefore = 30 * 24 * time.Hour

// Request describes a certificate to issue.
type Request struct {
	CommonName    string
	Organizations []string
	DNSNames      []string
	IPs           []netip.Addr
	Usage         Usage
	// Validity defaults to DefaultValidity.
	Validity time.Duration
}

func (r Request) extKeyUsages() []x509.ExtKeyUsage {
	var u []x509.ExtKeyUsage
	if r.Usage&ServerAuth != 0 {
		u = append(u, x509.ExtKeyUsageServerAuth)
	}
	if r.Usage&ClientAuth != 0 {
		u = append(u, x509.ExtKeyUsageClientAuth)
	}
	return u
}

// Issue creates a new key and a certificate for it signed by the CA.
func (ca *CA) Issue(req Request) (KeyPair, error) {
	if req.CommonName == "" {
		return KeyPair{}, fmt.Errorf("issue certificate: empty common name")
	}
	if req.Usage&(ServerAuth|ClientAuth) == 0 {
		return KeyPair{}, fmt.Errorf("issue certificate %q: no usage", req.CommonName)
	}
	validity := req.Validity
	if validity == 0 {
		validity = DefaultValidity
	}
	key, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return KeyPair{}, err
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	ips := make([]net.IP, 0, len(req.IPs))
	for _, ip := range req.IPs {
		ips = append(ips, net.IP(ip.Unmap().AsSlice()))
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.CommonName, Organization: req.Organizations},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           req.extKeyUsages(),
		BasicConstraintsValid: true,
		DNSNames:              req.DNSNames,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sign certificate %q: %w", req.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return KeyPair{}, fmt.Errorf("parse certificate %q: %w", req.CommonName, err)
	}
	return KeyPair{Cert: cert, Key: key}, nil
}

// Ensure makes certPath and keyPath hold a certificate for req signed by the CA. An
// existing pair is kept when it still satisfies req, so Prepare can run on every `up`
// without invalidating the kubeconfigs users already hold; otherwise a new pair is
// issued and written. It reports whether it wrote new files.
func (ca *CA) Ensure(certPath, keyPath string, req Request) (KeyPair, bool, error) {
	if kp, err := LoadKeyPair(certPath, keyPath); err == nil && ca.satisfies(kp, req) {
		return kp, false, nil
	}
	kp, err := ca.Issue(req)
	if err != nil {
		return KeyPair{}, false, err
	}
	if err := WriteKeyPair(certPath, keyPath, kp); err != nil {
		return KeyPair{}, false, err
	}
	return kp, true, nil
}

// satisfies reports whether kp was signed by this CA, is not about to expire, and has
// exactly the names and usages req asks for.
func (ca *CA) satisfies(kp KeyPair, req Request) bool {
	c := kp.Cert
	if err := c.CheckSignatureFrom(ca.Cert); err != nil {
		return false
	}
	if time.Until(c.NotAfter) < renewBefore {
		return false
	}
	if c.Subject.CommonName != req.CommonName ||
		!sameSet(c.Subject.Organization, req.Organizations) ||
		!sameSet(c.DNSNames, req.DNSNames) ||
		!slices.Equal(c.ExtKeyUsage, req.extKeyUsages()) {
		return false
	}
	var want, got []string
	for _, ip := range req.IPs {
		want = append(want, ip.Unmap().String())
	}
	for _, ip := range c.IPAddresses {
		a, _ := netip.AddrFromSlice(ip)
		got = append(got, a.Unmap().String())
	}
	if !sameSet(want, got) {
		return false
	}
	return keyMatches(c, kp.Key)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// Verify checks that cert chains to the CA for the given usage.
func (ca *CA) Verify(cert *x509.Certificate, usage x509.ExtKeyUsage) error {
	_, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("verify %q: %w", cert.Subject.CommonName, err)
	}
	return nil
}

// Equal reports whether two CAs are the same certificate and key.
func (ca *CA) Equal(other *CA) bool {
	return other != nil && bytes.Equal(ca.Cert.Raw, other.Cert.Raw) && ca.Key.Equal(other.Key)
}

// keyMatches is used when loading pairs from disk: a certificate next to a key that is
// not its own must be treated as absent.
func keyMatches(cert *x509.Certificate, key *ecdsa.PrivateKey) bool {
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	return ok && pub.Equal(key.Public())
}
