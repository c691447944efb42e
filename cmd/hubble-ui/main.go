// Command hubble-ui serves Hubble UI: the cluster's service map and flows
// in a browser, from hubble-relay, with the policy behind every edge
// (pkg/hubble/ui).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/crypto/certloader"
	"github.com/cilium-go/cilium/pkg/hubble/ui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand(&config{}).ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

// config has the flags; the TLS ones are the environment variables of
// Cilium's hubble-ui backend (TLS_TO_RELAY_ENABLED, TLS_RELAY_SERVER_NAME,
// ...) as flags.
type config struct {
	listenAddress   string
	relayAddress    string
	tlsToRelay      bool
	relayServerName string
	relayCAFiles    []string
	clientCert      string
	clientKey       string
	agentSocket     string
	kubeconfig      string
}

func newCommand(c *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:          "hubble-ui",
		Short:        "Hubble UI: the cluster's service map and flows in a browser",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE:         func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context()) },
	}
	fs := cmd.Flags()
	fs.StringVar(&c.listenAddress, "listen-address", ":8081", "where the page, its API and /healthz are served (HTTP)")
	fs.StringVar(&c.relayAddress, "relay-address", "hubble-relay.kube-system.svc:443", "hubble-relay's address (host:port)")
	fs.BoolVar(&c.tlsToRelay, "tls-to-relay-enabled", true, "connect to the relay with TLS (mutual, with the client certificate below)")
	fs.StringVar(&c.relayServerName, "tls-relay-server-name", "ui.hubble-relay.cilium.io", "the name the relay's certificate is verified for")
	fs.StringSliceVar(&c.relayCAFiles, "tls-relay-ca-cert-files", nil, "CAs that sign the relay's certificate")
	fs.StringVar(&c.clientCert, "tls-relay-client-cert-file", "", "the UI's client certificate towards the relay")
	fs.StringVar(&c.clientKey, "tls-relay-client-key-file", "", "the client certificate's key")
	fs.StringVar(&c.agentSocket, "agent-socket", "/var/run/cilium/cilium.sock",
		"the node's agent API, whose policy trace answers the \"why\" view; empty: no \"why\" view")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig for the API server (namespaces, policies); empty: in-cluster")
	return cmd
}

// relayCredentials are the UI's transport to the relay. Renewed
// certificate files are read at the next handshake.
func (c *config) relayCredentials(log *slog.Logger) (credentials.TransportCredentials, error) {
	if !c.tlsToRelay {
		return insecure.NewCredentials(), nil
	}
	if len(c.relayCAFiles) == 0 || c.clientCert == "" || c.clientKey == "" {
		return nil, errors.New("TLS to the relay needs --tls-relay-ca-cert-files, --tls-relay-client-cert-file and " +
			"--tls-relay-client-key-file (or --tls-to-relay-enabled=false)")
	}
	if c.relayServerName == "" {
		return nil, errors.New("--tls-relay-server-name: required with TLS to the relay")
	}
	l, err := certloader.New(certloader.Files{Cert: c.clientCert, Key: c.clientKey,
		CertFlags: "--tls-relay-client-cert-file, --tls-relay-client-key-file",
		CAs:       c.relayCAFiles, CAFlag: "--tls-relay-ca-cert-files"}, log)
	if err != nil {
		return nil, err
	}
	cfg := l.ClientConfig()
	cfg.ServerName = c.relayServerName
	return credentials.NewTLS(cfg), nil
}

func (c *config) restConfig() (*rest.Config, error) {
	if c.kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (or --kubeconfig): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", c.kubeconfig, err)
	}
	return cfg, nil
}

// server builds the backend from the flags: everything is checked
// before anything listens.
func (c *config) server(log *slog.Logger) (*ui.Server, func(), error) {
	creds, err := c.relayCredentials(log)
	if err != nil {
		return nil, nil, err
	}
	rc, err := c.restConfig()
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	conn, err := grpc.NewClient(c.relayAddress, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, fmt.Errorf("--relay-address %s: %w", c.relayAddress, err)
	}
	s := &ui.Server{Relay: observer.NewObserverClient(conn), Cluster: ui.NewCluster(dyn), Log: log}
	if c.agentSocket != "" {
		s.Tracer = client.New(c.agentSocket)
	}
	return s, func() { conn.Close() }, nil
}

func (c *config) run(ctx context.Context) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, closeRelay, err := c.server(log)
	if err != nil {
		return err
	}
	defer closeRelay()
	ln, err := net.Listen("tcp", c.listenAddress)
	if err != nil {
		return fmt.Errorf("--listen-address: %w", err)
	}
	// BaseContext: the page's flow streams end with the command.
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("hubble-ui serving", "address", ln.Addr().String(), "relay", c.relayAddress,
		"relay-tls", c.tlsToRelay, "why", c.agentSocket != "")
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
