package pki

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestIssueUsagesAndNames(t *testing.T) {
	ca := newTestCA(t)
	tests := []struct {
		name      string
		req       Request
		verifyOK  []x509.ExtKeyUsage
		verifyBad []x509.ExtKeyUsage
	}{
		{
			name: "server",
			req: Request{
				CommonName: "kube-apiserver",
				DNSNames:   []string{"kubernetes", "kubernetes.default.svc"},
				IPs:        []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("127.0.0.1")},
				Usage:      ServerAuth,
			},
			verifyOK:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			verifyBad: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			name:      "client",
			req:       Request{CommonName: "system:node:n1", Organizations: []string{"system:nodes"}, Usage: ClientAuth},
			verifyOK:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			verifyBad: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
		{
			name: "both",
			req: Request{
				CommonName: "etcd", DNSNames: []string{"localhost"},
				IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Usage: ServerAuth | ClientAuth,
			},
			verifyOK: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := ca.Issue(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			c := kp.Cert
			if c.IsCA {
				t.Error("leaf certificate is a CA")
			}
			if c.Subject.CommonName != tc.req.CommonName || !slices.Equal(c.Subject.Organization, tc.req.Organizations) {
				t.Errorf("subject %v, want CN %q O %v", c.Subject, tc.req.CommonName, tc.req.Organizations)
			}
			if !slices.Equal(c.DNSNames, tc.req.DNSNames) {
				t.Errorf("DNS SANs %v, want %v", c.DNSNames, tc.req.DNSNames)
			}
			if len(c.IPAddresses) != len(tc.req.IPs) {
				t.Fatalf("IP SANs %v, want %v", c.IPAddresses, tc.req.IPs)
			}
			for i, ip := range tc.req.IPs {
				if !c.IPAddresses[i].Equal(net.IP(ip.AsSlice())) {
					t.Errorf("IP SAN %d = %v, want %v", i, c.IPAddresses[i], ip)
				}
			}
			for _, u := range tc.verifyOK {
				if err := ca.Verify(c, u); err != nil {
					t.Errorf("usage %v: %v", u, err)
				}
			}
			for _, u := range tc.verifyBad {
				if err := ca.Verify(c, u); err == nil {
					t.Errorf("usage %v verified, want rejection", u)
				}
			}
			for _, name := range tc.req.DNSNames {
				if err := c.VerifyHostname(name); err != nil {
					t.Error(err)
				}
			}
			for _, ip := range tc.req.IPs {
				if err := c.VerifyHostname(ip.String()); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestIssueRejectsBadRequests(t *testing.T) {
	ca := newTestCA(t)
	if _, err := ca.Issue(Request{Usage: ClientAuth}); err == nil {
		t.Error("empty common name accepted")
	}
	if _, err := ca.Issue(Request{CommonName: "x"}); err == nil {
		t.Error("request without usage accepted")
	}
}

func TestOtherCADoesNotVerify(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	kp, err := ca.Issue(Request{CommonName: "c", Usage: ClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Verify(kp.Cert, x509.ExtKeyUsageClientAuth); err == nil {
		t.Error("certificate verified against a foreign CA")
	}
}

func TestLoadOrCreateCAReloadsSameCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "lab")
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateCA(dir, "lab")
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Equal(again) {
		t.Fatal("reloaded CA differs from the saved one")
	}
	st, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("CA key mode %v, want 0600", st.Mode().Perm())
	}
	// A certificate issued before the reload verifies with the reloaded CA.
	kp, err := ca.Issue(Request{CommonName: "c", Usage: ClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Verify(kp.Cert, x509.ExtKeyUsageClientAuth); err != nil {
		t.Error(err)
	}
}

func TestLoadOrCreateCARefusesHalfCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateCA(dir, "lab"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir, "lab"); err == nil {
		t.Fatal("CA without key was replaced or loaded; want an error")
	}
}

func TestEnsureKeepsMatchingPair(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")
	req := Request{
		CommonName: "admin", Organizations: []string{"system:masters"},
		IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Usage: ClientAuth,
	}
	first, wrote, err := ca.Ensure(certPath, keyPath, req)
	if err != nil || !wrote {
		t.Fatalf("first Ensure: wrote=%v err=%v", wrote, err)
	}
	second, wrote, err := ca.Ensure(certPath, keyPath, req)
	if err != nil {
		t.Fatal(err)
	}
	if wrote || first.Cert.SerialNumber.Cmp(second.Cert.SerialNumber) != 0 {
		t.Error("Ensure reissued a certificate that still matched")
	}

	changes := map[string]func(*Request){
		"common name":  func(r *Request) { r.CommonName = "other" },
		"organization": func(r *Request) { r.Organizations = []string{"system:nodes"} },
		"ip":           func(r *Request) { r.IPs = append(r.IPs, netip.MustParseAddr("10.0.0.1")) },
		"dns":          func(r *Request) { r.DNSNames = []string{"localhost"} },
		"usage":        func(r *Request) { r.Usage = ServerAuth | ClientAuth },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			r := req
			r.IPs = slices.Clone(req.IPs)
			change(&r)
			kp, wrote, err := ca.Ensure(certPath, keyPath, r)
			if err != nil {
				t.Fatal(err)
			}
			if !wrote {
				t.Fatal("Ensure kept a certificate that no longer matches")
			}
			if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
				t.Fatalf("written pair does not load with crypto/tls: %v", err)
			}
			if kp.Cert.Subject.CommonName != r.CommonName {
				t.Errorf("CN %q, want %q", kp.Cert.Subject.CommonName, r.CommonName)
			}
			// Restore the base request for the next case.
			if _, _, err := ca.Ensure(certPath, keyPath, req); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEnsureReplacesPairOfOtherCA(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")
	req := Request{CommonName: "c", Usage: ClientAuth}
	if _, _, err := other.Ensure(certPath, keyPath, req); err != nil {
		t.Fatal(err)
	}
	kp, wrote, err := ca.Ensure(certPath, keyPath, req)
	if err != nil {
		t.Fatal(err)
	}
	if !wrote {
		t.Fatal("kept a certificate signed by another CA")
	}
	if err := ca.Verify(kp.Cert, x509.ExtKeyUsageClientAuth); err != nil {
		t.Error(err)
	}
}

func TestEnsureRenewsNearExpiry(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")
	req := Request{CommonName: "c", Usage: ClientAuth, Validity: 24 * time.Hour}
	if _, _, err := ca.Ensure(certPath, keyPath, req); err != nil {
		t.Fatal(err)
	}
	if _, wrote, err := ca.Ensure(certPath, keyPath, req); err != nil || !wrote {
		t.Fatalf("certificate expiring within a day was kept: wrote=%v err=%v", wrote, err)
	}
}

func TestLoadKeyPairRejectsMismatch(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	a, err := ca.Issue(Request{CommonName: "a", Usage: ClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.Issue(Request{CommonName: "b", Usage: ClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")
	if err := WriteKeyPair(certPath, keyPath, KeyPair{Cert: a.Cert, Key: b.Key}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyPair(certPath, keyPath); err == nil {
		t.Fatal("mismatched pair loaded")
	}
}

func TestEnsureSigningKey(t *testing.T) {
	dir := t.TempDir()
	keyPath, pubPath := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	key, err := EnsureSigningKey(keyPath, pubPath)
	if err != nil {
		t.Fatal(err)
	}
	again, err := EnsureSigningKey(keyPath, pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if !key.Equal(again) {
		t.Fatal("signing key changed on the second call")
	}
	data, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		t.Fatalf("public key file holds %v", block)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if ec, ok := pub.(*ecdsa.PublicKey); !ok || !ec.Equal(key.Public()) {
		t.Error("public key file does not match the private key")
	}
	st, err := os.Stat(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("signing key mode %v, want 0600", st.Mode().Perm())
	}
}
