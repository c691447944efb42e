// Package hubble is the agent's Hubble server: it makes flows of the
// datapath's events (a subscriber of the monitor's) and of the layer-7
// proxy's records (pkg/proxy/accesslog), keeps the last ones in a ring and
// serves them through Hubble's Observer gRPC service on a unix socket (and
// to relays over TCP), and exports them to a file if asked
// (pkg/hubble/exporter).
package hubble

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/crypto/certloader"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/exporter"
	"github.com/cilium-go/cilium/pkg/hubble/metrics"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
)

// Cell runs the Hubble server when --enable-hubble is set: one cell per
// part, each of which builds nothing when Hubble is off.
var Cell = cell.Module("hubble", "Hubble - the datapath events as flows over gRPC",
	cell.Config(DefaultConfig),
	cell.Config(exporter.DefaultConfig),
	cell.Config(DefaultRedactConfig),
	health.JobGroup,
	// Flows of forwarded packets come from the datapath's traces.
	cell.Provide(func(c Config) nodedatapath.TracesWanted { return nodedatapath.TracesWanted(c.EnableHubble) }),
	cell.Invoke(validate),

	observerCell,              // events -> parser -> the node's flow ring, and the agent's events
	accessLogCell,             // the L7 proxy's records (accesslog.sock in --proxy-dir) -> parser -> the ring
	metricsCell,               // --hubble-metrics on --hubble-metrics-server
	exporterCell,              // --hubble-export-file-path
	cell.Provide(newServices), // what both gRPC servers serve
	tcpServerCell,             // --hubble-listen-address, mutual TLS for relays
	socketServerCell,          // --hubble-socket-path, the node's own clients
)

// Config has Cilium's flags and defaults.
type Config struct {
	EnableHubble              bool   `mapstructure:"enable-hubble"`
	HubbleSocketPath          string `mapstructure:"hubble-socket-path"`
	HubbleEventBufferCapacity int    `mapstructure:"hubble-event-buffer-capacity"`
	HubbleEventQueueSize      int    `mapstructure:"hubble-event-queue-size"`
	// HubbleListenAddress is where relays reach the node's server
	// (host:port, Cilium's :4244); empty: the socket only.
	HubbleListenAddress string `mapstructure:"hubble-listen-address"`
	// HubbleDisableTLS serves the listen address in plaintext.
	HubbleDisableTLS       bool     `mapstructure:"hubble-disable-tls"`
	HubbleTLSCertFile      string   `mapstructure:"hubble-tls-cert-file"`
	HubbleTLSKeyFile       string   `mapstructure:"hubble-tls-key-file"`
	HubbleTLSClientCAFiles []string `mapstructure:"hubble-tls-client-ca-files"`
	// HubbleMetrics are the flow metrics to count (pkg/hubble/metrics),
	// served on HubbleMetricsServer (host:port, Cilium's :9965).
	HubbleMetrics       string `mapstructure:"hubble-metrics"`
	HubbleMetricsServer string `mapstructure:"hubble-metrics-server"`
}

// queueSize is how many events wait for the parser: by default as many
// as the ring holds.
func (c Config) queueSize() int {
	if c.HubbleEventQueueSize > 0 {
		return c.HubbleEventQueueSize
	}
	return c.HubbleEventBufferCapacity + 1
}

// DefaultConfig: off, as Cilium's agent flag; Cilium's socket and ring size.
var DefaultConfig = Config{HubbleSocketPath: "/var/run/cilium/hubble.sock", HubbleEventBufferCapacity: 4095}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("enable-hubble", d.EnableHubble, "serve the datapath's flows through Hubble's gRPC API")
	fs.String("hubble-socket-path", d.HubbleSocketPath, "unix socket the Hubble server listens on")
	fs.Int("hubble-event-buffer-capacity", d.HubbleEventBufferCapacity, "how many flows the node keeps: 2^n-1, up to 65535")
	fs.Int("hubble-event-queue-size", d.HubbleEventQueueSize, "how many datapath events may wait to become flows (0: the buffer capacity)")
	fs.String("hubble-listen-address", d.HubbleListenAddress, "host:port where relays reach this node's Hubble server (Cilium's :4244); empty: the socket only")
	fs.Bool("hubble-disable-tls", d.HubbleDisableTLS, "serve --hubble-listen-address without TLS")
	fs.String("hubble-tls-cert-file", d.HubbleTLSCertFile, "the server's certificate for --hubble-listen-address")
	fs.String("hubble-tls-key-file", d.HubbleTLSKeyFile, "the server certificate's key")
	fs.StringSlice("hubble-tls-client-ca-files", d.HubbleTLSClientCAFiles, "CAs whose client certificates the server requires (mutual TLS); none: any client")
	fs.String("hubble-metrics", d.HubbleMetrics,
		"flow metrics, separated by spaces, each name[:option=value;...]: flow, drop, tcp, port-distribution, icmp, policy, dns, http, httpV2; "+
			"options sourceContext, destinationContext, labelsContext, and dns's query and ignoreAAAA (without a value)")
	fs.String("hubble-metrics-server", d.HubbleMetricsServer, "host:port where --hubble-metrics are served (Cilium's :9965); empty: none")
}

// Validate names the first bad flag.
func (c Config) Validate() error {
	if !c.EnableHubble {
		return nil
	}
	if err := container.CheckCapacity(c.HubbleEventBufferCapacity); err != nil {
		return fmt.Errorf("--hubble-event-buffer-capacity %w", err)
	}
	if c.HubbleEventQueueSize < 0 {
		return fmt.Errorf("--hubble-event-queue-size %d: want 0 or more", c.HubbleEventQueueSize)
	}
	if _, err := metrics.Parse(c.HubbleMetrics); err != nil {
		return fmt.Errorf("--hubble-metrics: %w", err)
	}
	if (c.HubbleMetrics == "") != (c.HubbleMetricsServer == "") {
		return fmt.Errorf("--hubble-metrics %q and --hubble-metrics-server %q: give both or neither", c.HubbleMetrics, c.HubbleMetricsServer)
	}
	if !filepath.IsAbs(c.HubbleSocketPath) {
		return fmt.Errorf("--hubble-socket-path %q: an absolute path is required", c.HubbleSocketPath)
	}
	if c.HubbleListenAddress == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(c.HubbleListenAddress); err != nil || port == "" {
		return fmt.Errorf("--hubble-listen-address %q: want host:port", c.HubbleListenAddress)
	}
	if !c.HubbleDisableTLS && (c.HubbleTLSCertFile == "" || c.HubbleTLSKeyFile == "") {
		return fmt.Errorf("--hubble-listen-address %q: TLS needs --hubble-tls-cert-file and --hubble-tls-key-file (or --hubble-disable-tls)",
			c.HubbleListenAddress)
	}
	return nil
}

// serverTLS is the listen address's TLS: the server's certificate and,
// with client CAs, mutual TLS that refuses a client without a
// certificate they signed. Renewed files are read at the next handshake.
func (c Config) serverTLS(log *slog.Logger) (*tls.Config, error) {
	l, err := certloader.New(certloader.Files{Cert: c.HubbleTLSCertFile, Key: c.HubbleTLSKeyFile,
		CertFlags: "--hubble-tls-cert-file, --hubble-tls-key-file",
		CAs:       c.HubbleTLSClientCAFiles, CAFlag: "--hubble-tls-client-ca-files"}, log)
	if err != nil {
		return nil, err
	}
	return l.ServerConfig(), nil
}

// validate checks the flags before any part is built, those of the
// exporter too when Hubble is on; the redaction's always, as Cilium's.
func validate(c Config, e exporter.Config, r RedactConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	if !c.EnableHubble {
		return nil
	}
	return e.Validate()
}

// listenPort is the port of the listen address, which peers announce.
func (c Config) listenPort() int {
	_, port, _ := net.SplitHostPort(c.HubbleListenAddress)
	n, _ := strconv.Atoi(port)
	return n
}

// Version is what ServerStatus reports.
const Version = "cilium-go"
