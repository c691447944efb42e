// Package etcd runs the lab's single-member etcd inside the cilium-lab binary (the
// hidden `cilium-lab etcd` subcommand), so the lab needs no separately built etcd.
// Clients and the peer listener speak TLS with lab certificates and must present a
// client certificate signed by the lab CA.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Config is the configuration of the embedded etcd. The zero value is not usable;
// start from DefaultConfig.
type Config struct {
	// Name of the single member.
	Name string
	// DataDir holds the WAL and the database.
	DataDir string
	// ClientAddr is where the API server connects (https).
	ClientAddr netip.AddrPort
	// PeerAddr is the raft peer listener (https). A single member never uses it,
	// but etcd requires one.
	PeerAddr netip.AddrPort
	// CertFile and KeyFile are the serving certificate, also presented to peers; it
	// needs both server and client usage.
	CertFile string
	KeyFile  string
	// CAFile verifies client and peer certificates.
	CAFile string
	// UnsafeNoFsync skips fsync: much faster on slow disks, but a machine crash can
	// lose or corrupt the data. Acceptable for a disposable lab cluster.
	UnsafeNoFsync bool
	// LogLevel is etcd's zap level: debug, info, warn, error.
	LogLevel string
}

// DefaultConfig listens on 127.0.0.1:2379 (clients) and 127.0.0.1:2380 (peer).
func DefaultConfig() Config {
	return Config{
		Name:       "lab",
		ClientAddr: netip.MustParseAddrPort("127.0.0.1:2379"),
		PeerAddr:   netip.MustParseAddrPort("127.0.0.1:2380"),
		LogLevel:   "warn",
	}
}

// Flags registers the configuration's flags on fs. Args produces the matching
// command line.
func (c *Config) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Name, "name", c.Name, "name of the etcd member")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the WAL and database")
	fs.Var(addrPortValue{&c.ClientAddr}, "client-addr", "address:port of the client (https) listener")
	fs.Var(addrPortValue{&c.PeerAddr}, "peer-addr", "address:port of the peer (https) listener")
	fs.StringVar(&c.CertFile, "cert", c.CertFile, "PEM serving certificate (server and client usage)")
	fs.StringVar(&c.KeyFile, "key", c.KeyFile, "PEM key of --cert")
	fs.StringVar(&c.CAFile, "ca", c.CAFile, "PEM CA that client and peer certificates must chain to")
	fs.BoolVar(&c.UnsafeNoFsync, "unsafe-no-fsync", c.UnsafeNoFsync, "do not fsync (fast, loses data on a machine crash)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn, error")
}

// Args returns the flags that make Flags reproduce c.
func (c Config) Args() []string {
	return []string{
		"--name=" + c.Name,
		"--data-dir=" + c.DataDir,
		"--client-addr=" + c.ClientAddr.String(),
		"--peer-addr=" + c.PeerAddr.String(),
		"--cert=" + c.CertFile,
		"--key=" + c.KeyFile,
		"--ca=" + c.CAFile,
		fmt.Sprintf("--unsafe-no-fsync=%t", c.UnsafeNoFsync),
		"--log-level=" + c.LogLevel,
	}
}

// ClientURL is the URL the API server passes to --etcd-servers.
func (c Config) ClientURL() string { return "https://" + c.ClientAddr.String() }

// Validate reports the first missing or invalid setting.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("etcd: --name is required")
	case c.DataDir == "":
		return errors.New("etcd: --data-dir is required")
	case !c.ClientAddr.IsValid() || c.ClientAddr.Port() == 0:
		return errors.New("etcd: --client-addr needs an address and a port")
	case !c.PeerAddr.IsValid() || c.PeerAddr.Port() == 0:
		return errors.New("etcd: --peer-addr needs an address and a port")
	case c.CertFile == "" || c.KeyFile == "" || c.CAFile == "":
		return errors.New("etcd: --cert, --key and --ca are required (the lab runs etcd with TLS only)")
	}
	return nil
}

// embedConfig translates c into etcd's own configuration.
func (c Config) embedConfig() *embed.Config {
	client := url.URL{Scheme: "https", Host: c.ClientAddr.String()}
	peer := url.URL{Scheme: "https", Host: c.PeerAddr.String()}
	tlsInfo := transport.TLSInfo{
		CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile, ClientCertAuth: true,
	}

	ec := embed.NewConfig()
	ec.Name = c.Name
	ec.Dir = c.DataDir
	ec.ListenClientUrls = []url.URL{client}
	ec.AdvertiseClientUrls = []url.URL{client}
	ec.ListenPeerUrls = []url.URL{peer}
	ec.AdvertisePeerUrls = []url.URL{peer}
	ec.InitialCluster = c.Name + "=" + peer.String()
	ec.ClientTLSInfo = tlsInfo
	ec.PeerTLSInfo = tlsInfo
	ec.UnsafeNoFsync = c.UnsafeNoFsync
	ec.LogLevel = c.LogLevel
	ec.LogOutputs = []string{embed.StdErrLogOutput}
	// The API server talks gRPC; the HTTP/JSON gateway would only be one more handler.
	ec.EnableGRPCGateway = false
	return ec
}

// Run starts etcd and serves until ctx is done or etcd fails. It returns nil after a
// clean shutdown caused by ctx.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	e, err := embed.StartEtcd(cfg.embedConfig())
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-e.Server.StopNotify():
		return errors.New("etcd stopped before becoming ready")
	case <-ctx.Done():
		return nil
	}
	select {
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-e.Server.StopNotify():
		return errors.New("etcd stopped")
	case <-ctx.Done():
		return nil
	}
}
