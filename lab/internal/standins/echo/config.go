// Package echo is the lab's stand-in for Istio's echo server, the program of
// Gateway API's echo-advanced image (FROM Istio's app image), which cilium-cli's
// connectivity test runs as its l7-lb Deployment: HTTP on every --port (HTTPS
// on those also in --tls), a TCP echo on every --tcp port and a gRPC server on
// every --grpc port. It answers as much as the suite asks of it: 200 with the
// echo app's key=value lines on any path.
package echo

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/pflag"
)

// Config is what the server's flags say. The flags are the subset of the
// real server's that the lab's users pass; any other is refused.
type Config struct {
	// HTTPPorts serve HTTP, or HTTPS when also in TLSPorts.
	HTTPPorts []int
	// TCPPorts echo back what they read.
	TCPPorts []int
	// GRPCPorts serve the gRPC health service.
	GRPCPorts []int
	// TLSPorts are ports of HTTPPorts or GRPCPorts that use TLS.
	TLSPorts []int
	// Cert and Key are the PEM files of the TLS certificate.
	Cert, Key string
	// Version and Cluster are reported as ServiceVersion= and Cluster=.
	Version, Cluster string
}

// ParseFlags reads the server's flags. Errors are returned, not printed;
// --help prints the flags to stderr and returns pflag.ErrHelp.
func ParseFlags(args []string, stderr io.Writer) (Config, error) {
	var c Config
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntSliceVar(&c.HTTPPorts, "port", []int{8080}, "HTTP ports (repeatable)")
	fs.IntSliceVar(&c.TCPPorts, "tcp", nil, "TCP echo ports (repeatable)")
	fs.IntSliceVar(&c.GRPCPorts, "grpc", []int{7070}, "gRPC ports (repeatable)")
	fs.IntSliceVar(&c.TLSPorts, "tls", nil, "ports of --port or --grpc that use TLS (repeatable)")
	fs.StringVar(&c.Cert, "crt", "", "TLS certificate (PEM); generated when the file does not exist")
	fs.StringVar(&c.Key, "key", "", "TLS key (PEM); generated when the file does not exist")
	fs.StringVar(&c.Version, "version", "", "reported as ServiceVersion")
	fs.StringVar(&c.Cluster, "cluster", "", "reported as Cluster")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, c.validate()
}

func (c Config) validate() error {
	seen := map[int]string{}
	for _, l := range []struct {
		flag  string
		ports []int
	}{{"--port", c.HTTPPorts}, {"--tcp", c.TCPPorts}, {"--grpc", c.GRPCPorts}} {
		for _, p := range l.ports {
			if p < 0 || p > 65535 {
				return fmt.Errorf("%s=%d: not a port number", l.flag, p)
			}
			// Port 0 asks for any free port: it may repeat.
			if prev, ok := seen[p]; ok && p != 0 {
				return fmt.Errorf("%s=%d: port already given by %s", l.flag, p, prev)
			}
			seen[p] = l.flag
		}
	}
	for _, p := range c.TLSPorts {
		if !slices.Contains(c.HTTPPorts, p) && !slices.Contains(c.GRPCPorts, p) {
			return fmt.Errorf("--tls=%d: not a --port or --grpc port", p)
		}
	}
	if len(c.TLSPorts) > 0 && (c.Cert == "") != (c.Key == "") {
		return fmt.Errorf("--crt and --key go together")
	}
	return nil
}
