package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
)

// TestObserveWithMutualTLS runs the CLI against a server that wants a
// client certificate of its CA, as the relay does, with Hubble's flags.
func TestObserveWithMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewPKI(t, dir, "ca")
	ca.Issue(t, "relay", x509.ExtKeyUsageServerAuth, []string{"*.hubble-relay.cilium.io"})
	ca.Issue(t, "cli", x509.ExtKeyUsageClientAuth, nil)
	kp, err := tls.LoadX509KeyPair(ca.Path("relay.crt"), ca.Path("relay.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(ca.Path("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AppendCertsFromPEM(caPEM)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: clients,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13})))
	ring, _ := container.NewRing(7)
	ring.Write(container.Event{Flow: &flow.Flow{Time: timestamppb.New(time.Now().Add(-time.Minute)), NodeName: "n1", Verdict: flow.Verdict_FORWARDED,
		IP: &flow.IP{Source: "10.0.1.5", Destination: "10.0.2.7"}}})
	observer.RegisterObserverServer(srv, hubbleobserver.New(ring, "n1", "test"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := newRootCommand(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"observe", "--timeout", "1s"}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	server := ln.Addr().String()
	verify := []string{"--tls-ca-cert-files", ca.Path("ca.crt"), "--tls-server-name", "hubble.hubble-relay.cilium.io"}
	cert := []string{"--tls-client-cert-file", ca.Path("cli.crt"), "--tls-client-key-file", ca.Path("cli.key")}
	for _, args := range [][]string{
		append(append([]string{"--server", server, "--tls"}, verify...), cert...),
		append(append([]string{"--server", "tls://" + server}, verify...), cert...),
	} {
		if out, err := run(args...); err != nil || !strings.Contains(out, "10.0.1.5") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		// No client certificate: the server's alert, or a write to the
		// connection it closed.
		{append([]string{"--server", server, "--tls"}, verify...), "connect to"},
		{append([]string{"--server", server}, cert...), "need --tls"},                        // certificate without TLS
		{[]string{"--server", server}, "server preface"},                                     // plaintext
		{append([]string{"--server", server, "--tls"}, cert...), "x509"},                     // the system's CAs
		{[]string{"--server", server, "--tls", "--tls-client-key-file", "k"}, "go together"}, // half a pair
	} {
		_, err := run(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want refused (%q)", tc.args, err, tc.want)
		}
	}
}
