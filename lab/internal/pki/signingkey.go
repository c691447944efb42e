package pki

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
)

// EnsureSigningKey makes keyPath hold an ECDSA P-256 private key and pubPath its
// public key (PKIX, "PUBLIC KEY"). kube-apiserver signs service-account tokens with
// the private key (ES256) and verifies them with the public one; the controller
// manager's token controller signs with the same private key. An existing key is kept
// so that tokens already handed to pods stay valid across `up`.
func EnsureSigningKey(keyPath, pubPath string) (*ecdsa.PrivateKey, error) {
	key, err := LoadKey(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = newKey()
		if err != nil {
			return nil, err
		}
		keyPEM, err := encodeKey(key)
		if err != nil {
			return nil, err
		}
		if err := WriteFile(keyPath, keyPEM, 0o600); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	// The public half is always rewritten from the private key: it is cheap and
	// guarantees the two never disagree.
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, fmt.Errorf("marshal public key: %w", err)
	}
	if err := WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	return key, nil
}
