package echo

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// l7LBArgs are the args cilium-cli's connectivity test gives its l7-lb
// Deployment's container.
var l7LBArgs = []string{"--tcp=9090", "--port=8080", "--grpc=7070", "--port=8443", "--tls=8443", "--crt=/cert.crt", "--key=/cert.key"}

// start runs a server of args with every configured port on a free loopback
// port, and returns the address of each configured port.
func start(t *testing.T, args []string) map[int]string {
	t.Helper()
	cfg, err := ParseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The lab's pod root has no /cert.crt: the test must not depend on the host.
	cfg.Cert, cfg.Key = t.TempDir()+"/cert.crt", t.TempDir()+"/cert.key"
	s, err := New(cfg, "l7-lb-abc", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !s.generated {
		t.Fatal("no certificate generated for missing files")
	}
	// Listeners made before Run starts: a client may connect at once, the
	// kernel queues it until the server accepts.
	addrs := map[int]string{}
	lns := map[int]net.Listener{}
	for _, ports := range [][]int{cfg.HTTPPorts, cfg.TCPPorts, cfg.GRPCPorts} {
		for _, p := range ports {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			lns[p], addrs[p] = ln, ln.Addr().String()
		}
	}
	listen := func(port int) (net.Listener, error) { return lns[port], nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, listen) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return addrs
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		// Like the suite's curl -k: the certificate is self-signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Every --port answers 200 with the echo app's fields; 8443, also in --tls,
// over TLS with a certificate made at start since /cert.crt does not exist.
func TestHTTPAndHTTPS(t *testing.T) {
	addrs := start(t, l7LBArgs)
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"http://" + addrs[8080] + "/", []string{"ServiceVersion=\n", "ServicePort=8080\n", "Host=" + addrs[8080] + "\n",
			"URL=/\n", "Method=GET\n", "Proto=HTTP/1.1\n", "IP=127.0.0.1\n", "RequestHeader=User-Agent:Go-http-client/1.1\n",
			"Hostname=l7-lb-abc\n", "StatusCode=200\n"}},
		{"http://" + addrs[8080] + "/some/path?x=1", []string{"URL=/some/path?x=1\n"}},
		{"https://" + addrs[8443] + "/", []string{"ServicePort=8443\n", "Proto=HTTP/2.0\n", "Alpn=h2\n", "Hostname=l7-lb-abc\n"}},
	} {
		status, body := get(t, tc.url)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d", tc.url, status)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: body %q lacks %q", tc.url, body, w)
			}
		}
	}
	// Plain HTTP to the TLS port fails: 8443 is HTTPS only.
	c := &http.Client{Timeout: 5 * time.Second}
	if resp, err := c.Get("http://" + addrs[8443] + "/"); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to the TLS port: 200")
		}
		resp.Body.Close()
	}
}

// --tcp ports write back what they read.
func TestTCPEcho(t *testing.T) {
	addrs := start(t, l7LBArgs)
	c, err := net.DialTimeout("tcp", addrs[9090], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	msg := []byte("hello echo\n")
	for range 2 {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Errorf("echoed %q, want %q", got, msg)
		}
	}
}

// --grpc ports serve the gRPC health service.
func TestGRPCHealth(t *testing.T) {
	addrs := start(t, l7LBArgs)
	conn, err := grpc.NewClient(addrs[7070], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health %v", resp.Status)
	}
}

// Certificate files that exist are used as they are.
func TestCertificateFromFiles(t *testing.T) {
	// A certificate made by the server itself, written out as PEM.
	cert, err := selfSigned("h")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := writePEM(t, cert)
	got, generated, err := loadCertificate(certFile, keyFile, "h")
	if err != nil || generated || !bytes.Equal(got.Certificate[0], cert.Certificate[0]) {
		t.Errorf("loadCertificate: generated %v, err %v, same %v", generated, err, err == nil && bytes.Equal(got.Certificate[0], cert.Certificate[0]))
	}
	// A file that exists but is not a certificate is an error, not replaced.
	if _, _, err := loadCertificate(keyFile, keyFile, "h"); err == nil {
		t.Error("a key as certificate: no error")
	}
}

// Flags the stand-in does not know, and wrong ones, are refused naming the
// flag; the suite's args parse.
func TestFlags(t *testing.T) {
	cfg, err := ParseFlags(l7LBArgs, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(cfg.HTTPPorts, 8080, 8443) || !equal(cfg.TCPPorts, 9090) || !equal(cfg.GRPCPorts, 7070) ||
		!equal(cfg.TLSPorts, 8443) || cfg.Cert != "/cert.crt" || cfg.Key != "/cert.key" {
		t.Errorf("config %+v", cfg)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--port=8080", "--xds-grpc-server=1"}, "unknown flag: --xds-grpc-server"},
		{[]string{"--udp=53"}, "unknown flag: --udp"},
		{[]string{"--port=http"}, "--port"},
		{[]string{"--port=70000"}, "--port=70000: not a port number"},
		{[]string{"--port=8080", "--tcp=8080"}, "--tcp=8080: port already given by --port"},
		{[]string{"--port=8080", "--tls=8443"}, "--tls=8443: not a --port or --grpc port"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stderr bytes.Buffer
		if code := Main(tc.args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("Main(%q): exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

func equal(got []int, want ...int) bool { return slices.Equal(got, want) }

// writePEM writes cert's certificate and key to files of a temporary directory.
func writePEM(t *testing.T, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.crt"), filepath.Join(dir, "cert.key")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{certFile, "CERTIFICATE", cert.Certificate[0]}, {keyFile, "PRIVATE KEY", key}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
