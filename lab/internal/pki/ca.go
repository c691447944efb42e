// Package pki is the lab's certificate authority: one CA that signs every serving and
// client certificate of the cluster, plus the service-account signing key. Everything
// is stored as PEM files so that the Kubernetes components, etcd and kubeconfigs read
// them directly, and so that a restarted lab keeps trusting the certificates it issued.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// File names of the CA inside its directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// caValidity is long because a lab CA is never rotated: `cilium-lab down` deletes it.
const caValidity = 10 * 365 * 24 * time.Hour

// CA is a certificate authority: its certificate and private key.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA creates a self-signed CA with an ECDSA P-256 key.
func NewCA(commonName string) (*CA, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour), // tolerate small clock differences
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads ca.crt and ca.key from dir.
func LoadCA(dir string) (*CA, error) {
	kp, err := LoadKeyPair(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	if !kp.Cert.IsCA {
		return nil, fmt.Errorf("%s: not a CA certificate", filepath.Join(dir, CACertFile))
	}
	return &CA{Cert: kp.Cert, Key: kp.Key}, nil
}

// Save writes ca.crt and ca.key (mode 0600) into dir, creating it.
func (ca *CA) Save(dir string) error {
	return WriteKeyPair(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile),
		KeyPair{Cert: ca.Cert, Key: ca.Key})
}

// LoadOrCreateCA loads the CA in dir, or creates and saves a new one when dir holds
// none. A directory holding only one of the two files is an error rather than a reason
// to overwrite it: certificates issued earlier would silently stop verifying.
func LoadOrCreateCA(dir, commonName string) (*CA, error) {
	_, certErr := os.Stat(filepath.Join(dir, CACertFile))
	_, keyErr := os.Stat(filepath.Join(dir, CAKeyFile))
	switch {
	case certErr == nil && keyErr == nil:
		return LoadCA(dir)
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
		ca, err := NewCA(commonName)
		if err != nil {
			return nil, err
		}
		if err := ca.Save(dir); err != nil {
			return nil, err
		}
		return ca, nil
	case certErr != nil && !errors.Is(certErr, fs.ErrNotExist):
		return nil, fmt.Errorf("stat CA certificate: %w", certErr)
	case keyErr != nil && !errors.Is(keyErr, fs.ErrNotExist):
		return nil, fmt.Errorf("stat CA key: %w", keyErr)
	default:
		return nil, fmt.Errorf("CA in %s is incomplete: need both %s and %s", dir, CACertFile, CAKeyFile)
	}
}

// CertPEM returns the CA certificate in PEM form, as kubeconfigs and --client-ca-file want it.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Pool returns a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return key, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial: %w", err)
	}
	return serial, nil
}
