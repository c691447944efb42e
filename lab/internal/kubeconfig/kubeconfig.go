// Package kubeconfig writes the kubeconfig files through which lab components and
// users reach the API server: one cluster, one user authenticated by a client
// certificate, one context, everything embedded so a file is self-contained and can be
// copied or printed (`cilium-lab kubeconfig`).
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cilium-go/cilium/lab/internal/pki"
)

// Spec is the content of a single-context kubeconfig.
type Spec struct {
	// Cluster names the cluster and the context, e.g. "cilium-lab".
	Cluster string
	// Server is the API server URL, e.g. https://172.30.0.2:6443.
	Server string
	// CAPEM is the CA that signed the API server's serving certificate.
	CAPEM []byte
	// User names the user entry; by convention the certificate's common name.
	User string
	// CertPEM and KeyPEM are the client certificate and key.
	CertPEM []byte
	KeyPEM  []byte
}

// Config returns the kubeconfig as client-go's type.
func (s Spec) Config() *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[s.Cluster] = &clientcmdapi.Cluster{
		Server:                   s.Server,
		CertificateAuthorityData: s.CAPEM,
	}
	cfg.AuthInfos[s.User] = &clientcmdapi.AuthInfo{
		ClientCertificateData: s.CertPEM,
		ClientKeyData:         s.KeyPEM,
	}
	cfg.Contexts[s.Cluster] = &clientcmdapi.Context{Cluster: s.Cluster, AuthInfo: s.User}
	cfg.CurrentContext = s.Cluster
	return cfg
}

// Write writes the kubeconfig to path with mode 0600 (it holds a private key),
// replacing any previous file atomically.
func Write(path string, s Spec) error {
	if s.Cluster == "" || s.Server == "" || s.User == "" {
		return fmt.Errorf("kubeconfig %s: cluster, server and user are required", path)
	}
	data, err := clientcmd.Write(*s.Config())
	if err != nil {
		return fmt.Errorf("encode kubeconfig %s: %w", path, err)
	}
	return pki.WriteFile(path, data, 0o600)
}

// ForKeyPair fills a Spec for a client certificate issued by ca; the user entry is
// named after the certificate's common name.
func ForKeyPair(cluster, server string, ca *pki.CA, kp pki.KeyPair) (Spec, error) {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return Spec{}, err
	}
	return Spec{
		Cluster: cluster,
		Server:  server,
		CAPEM:   ca.CertPEM(),
		User:    kp.Cert.Subject.CommonName,
		CertPEM: kp.CertPEM(),
		KeyPEM:  keyPEM,
	}, nil
}
