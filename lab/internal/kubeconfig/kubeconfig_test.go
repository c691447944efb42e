package kubeconfig

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/lab/internal/pki"
)

// TestWrittenKubeconfigAuthenticates writes a kubeconfig and uses it, through
// client-go, against a TLS server that trusts only the lab CA and requires a client
// certificate: the server must see the certificate's user and group.
func TestWrittenKubeconfigAuthenticates(t *testing.T) {
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(pki.Request{
		CommonName: "apiserver", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Usage: pki.ServerAuth,
	})
	if err != nil {
		t.Fatal(err)
	}
	servingKey, err := serving.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	servingTLS, err := tls.X509KeyPair(serving.CertPEM(), servingKey)
	if err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := r.TLS.PeerCertificates[0]
		io.WriteString(w, peer.Subject.CommonName+"/"+peer.Subject.Organization[0])
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{servingTLS},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	client, err := ca.Issue(pki.Request{
		CommonName: "system:node:n1", Organizations: []string{"system:nodes"}, Usage: pki.ClientAuth,
	})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ForKeyPair("cilium-lab", srv.URL, ca, client)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "node.conf")
	if err := Write(path, spec); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v, want 0600", st.Mode().Perm())
	}

	loaded, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.CurrentContext != "cilium-lab" || loaded.Contexts["cilium-lab"].AuthInfo != "system:node:n1" {
		t.Errorf("context %q -> %+v", loaded.CurrentContext, loaded.Contexts[loaded.CurrentContext])
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if got := string(body); got != "system:node:n1/system:nodes" {
		t.Errorf("server saw %q, want system:node:n1/system:nodes", got)
	}
}

func TestWriteRequiresNames(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "x"), Spec{Server: "https://127.0.0.1:6443"}); err == nil {
		t.Fatal("kubeconfig without cluster and user written")
	}
}
