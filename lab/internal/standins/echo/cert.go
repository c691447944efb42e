package echo

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"time"
)

// loadCertificate reads the certificate and key files, or makes a self-signed
// certificate when either file does not exist (or none is named). The real
// image carries its own /cert.crt and /cert.key; a lab pod's root is the
// host's filesystem, which has neither, and clients of the echo server do
// not verify it (the suite's curl runs with -k), so any certificate serves.
// generated says which happened, for the log.
func loadCertificate(certFile, keyFile, hostname string) (cert tls.Certificate, generated bool, err error) {
	if certFile != "" {
		cert, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err == nil {
			return cert, false, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return tls.Certificate{}, false, fmt.Errorf("load certificate %s: %w", certFile, err)
		}
	}
	cert, err = selfSigned(hostname)
	return cert, true, err
}

func selfSigned(hostname string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate serial: %w", err)
	}
	names := []string{"localhost"}
	if hostname != "" && hostname != "localhost" {
		names = append(names, hostname)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[len(names)-1]},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
