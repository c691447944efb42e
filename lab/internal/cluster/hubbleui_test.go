package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/lab/internal/plan"
)

func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// echoServer answers each connection with "echo:" and what it read up to
// the client's end of stream.
func echoServer(t *testing.T) net.Listener {
	ln := loopbackListener(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				c.Write(append([]byte("echo:"), b...))
			}()
		}
	}()
	return ln
}

// roundTrip sends msg on a new connection to addr, closes its side and
// reads the answer until the far end closes.
func roundTrip(t *testing.T, addr, msg string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	return string(b), err
}

// closedUnanswered says that a roundTrip got nothing back: the far end
// closed, or reset the connection for the request it did not read.
func closedUnanswered(got string, err error) bool {
	return got == "" && (err == nil || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

// The forwarder copies both ways and passes the client's end of stream
// on; a connection it cannot dial is closed, and the next is served.
func TestForward(t *testing.T) {
	backend := echoServer(t)
	ln := loopbackListener(t)
	var fail atomic.Bool
	fail.Store(true)
	go forward(t.Context(), ln, func(ctx context.Context) (net.Conn, error) {
		if fail.Load() {
			return nil, io.ErrUnexpectedEOF
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", backend.Addr().String())
	}, slog.New(slog.DiscardHandler))

	if got, err := roundTrip(t, ln.Addr().String(), "lost"); !closedUnanswered(got, err) {
		t.Errorf("without a backend: %q, %v; want the connection closed", got, err)
	}
	fail.Store(false)
	if got, err := roundTrip(t, ln.Addr().String(), "hello"); err != nil || got != "echo:hello" {
		t.Errorf("forwarded: %q, %v; want echo:hello", got, err)
	}
}

func slice(addrType discoveryv1.AddressType, port string, num int32, endpoints ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "hubble-ui-" + strconv.Itoa(int(num)), Namespace: "kube-system", Labels: map[string]string{discoveryv1.LabelServiceName: "hubble-ui"}},
		AddressType: addrType, Ports: []discoveryv1.EndpointPort{{Name: &port, Port: &num}}, Endpoints: endpoints,
	}
}

func endpoint(ready *bool, addrs ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func TestReadyEndpoints(t *testing.T) {
	yes, no := true, false
	got := readyEndpoints([]discoveryv1.EndpointSlice{
		slice(discoveryv1.AddressTypeIPv4, "http", 8081, endpoint(&yes, "10.0.0.1"), endpoint(&no, "10.0.0.2"), endpoint(nil, "10.0.0.3")),
		slice(discoveryv1.AddressTypeIPv4, "metrics", 9090, endpoint(&yes, "10.0.0.4")),
		slice(discoveryv1.AddressTypeIPv6, "http", 8081, endpoint(&yes, "fd00::1")),
	}, "http")
	if want := []string{"10.0.0.1:8081", "10.0.0.3:8081"}; !slices.Equal(got, want) {
		t.Errorf("ready endpoints %q, want %q", got, want)
	}
}

// dialService tries the Service's ready endpoints in turn and names the
// Service when none answers.
func TestDialService(t *testing.T) {
	ctx := t.Context()
	var d net.Dialer
	yes := true
	kube := fake.NewClientset()
	if _, err := dialService(ctx, kube, d.DialContext, "kube-system", "hubble-ui", "http"); err == nil ||
		!strings.Contains(err.Error(), "kube-system/hubble-ui has no ready endpoint") {
		t.Errorf("without endpoints: %v", err)
	}

	backend := echoServer(t)
	closed := loopbackListener(t)
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	port := backend.Addr().(*net.TCPAddr).Port
	// Two ports, two slices: the closed one first.
	s1 := slice(discoveryv1.AddressTypeIPv4, "http", int32(closedPort), endpoint(&yes, "127.0.0.1"))
	s2 := slice(discoveryv1.AddressTypeIPv4, "http", int32(port), endpoint(&yes, "127.0.0.1"))
	s1.Name, s2.Name = "a", "b"
	kube = fake.NewClientset(&s1, &s2)
	c, err := dialService(ctx, kube, d.DialContext, "kube-system", "hubble-ui", "http")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := c.RemoteAddr().String(); got != backend.Addr().String() {
		t.Errorf("dialed %s, want the endpoint that answers, %s", got, backend.Addr())
	}
}

// With its port taken, the UI's forwarder serves from another, which the
// URL file and up's message say; without a ready endpoint, connections
// are closed.
func TestForwardUIFallsBackToAFreePort(t *testing.T) {
	taken := loopbackListener(t)
	o := plan.DefaultOptions()
	o.StateDir = t.TempDir()
	o.InstallDir = "/src/install/kubernetes"
	o.UIPort = taken.Addr().(*net.TCPAddr).Port
	p, err := plan.New(o)
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}})
	if err := forwardUI(t.Context(), p, kube, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	url, err := UIURL(p.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if url == uiURL(p) || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("URL %s, want another port of 127.0.0.1 than the taken %d", url, o.UIPort)
	}
	var out bytes.Buffer
	printUI(&out, p)
	if s := out.String(); !strings.Contains(s, "Hubble UI: "+url) || !strings.Contains(s, "was taken") {
		t.Errorf("up says:\n%s", s)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
	if got, err := roundTrip(t, addr, "GET / HTTP/1.0\r\n\r\n"); !closedUnanswered(got, err) {
		t.Errorf("without a ready endpoint: %q, %v; want the connection closed", got, err)
	}
}
