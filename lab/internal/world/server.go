// Package world serves the lab's stand-in for the internet: HTTP and HTTPS on the
// world's addresses, and the DNS of its names on the first, from the outside
// client's network namespace, where the supervisor runs it (cilium-lab
// world-server). cilium-cli's connectivity test curls it as its external target;
// any path answers 200 with a small body. The cluster's DNS forwards the world's
// zones to it, as a real cluster's forwards to the internet.
package world

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Body is what every request gets.
const Body = "Hello from the cilium-lab world\n"

// Config is what the world server serves and where.
type Config struct {
	// Addrs are the world's addresses, each served on both ports.
	Addrs []netip.Addr
	// HTTPPort and HTTPSPort; 0 picks a free port per address (tests).
	HTTPPort  int
	HTTPSPort int
	// CertFile and KeyFile are the PEM serving certificate (for the world's
	// names and addresses) and its key.
	CertFile string
	KeyFile  string
	// DNSPort is where the first address answers DNS (UDP) for Hosts
	// ("name=address") and Aliases ("name=target", a CNAME to a host);
	// none without hosts.
	DNSPort int
	Hosts   []string
	Aliases []string
}

// DefaultConfig serves on the usual ports.
func DefaultConfig() Config { return Config{HTTPPort: 80, HTTPSPort: 443, DNSPort: 53} }

// Flags registers the configuration's flags on fs; Args produces the matching
// command line.
func (c *Config) Flags(fs *pflag.FlagSet) {
	fs.Var(addrsValue{&c.Addrs}, "addr", "an address to serve on (repeat for more)")
	fs.IntVar(&c.HTTPPort, "http-port", c.HTTPPort, "port of plain HTTP")
	fs.IntVar(&c.HTTPSPort, "https-port", c.HTTPSPort, "port of HTTPS")
	fs.StringVar(&c.CertFile, "cert", c.CertFile, "PEM serving certificate of HTTPS")
	fs.StringVar(&c.KeyFile, "key", c.KeyFile, "PEM key of --cert")
	fs.IntVar(&c.DNSPort, "dns-port", c.DNSPort, "UDP port of DNS, on the first --addr")
	fs.StringArrayVar(&c.Hosts, "host", c.Hosts, "NAME=ADDRESS: a name DNS answers with an address (repeat for more)")
	fs.StringArrayVar(&c.Aliases, "alias", c.Aliases, "NAME=TARGET: a name DNS answers with a CNAME to a --host name (repeat for more)")
}

// Args returns the flags that make Flags reproduce c.
func (c Config) Args() []string {
	var args []string
	for _, a := range c.Addrs {
		args = append(args, "--addr="+a.String())
	}
	args = append(args,
		"--http-port="+strconv.Itoa(c.HTTPPort),
		"--https-port="+strconv.Itoa(c.HTTPSPort),
		"--cert="+c.CertFile,
		"--key="+c.KeyFile,
		"--dns-port="+strconv.Itoa(c.DNSPort),
	)
	for _, h := range c.Hosts {
		args = append(args, "--host="+h)
	}
	for _, a := range c.Aliases {
		args = append(args, "--alias="+a)
	}
	return args
}

// zone is the DNS zone of Hosts and Aliases.
func (c Config) zone() (Zone, error) {
	z := Zone{Hosts: map[string]netip.Addr{}, Aliases: map[string]string{}}
	for _, h := range c.Hosts {
		name, addr, _ := strings.Cut(h, "=")
		a, err := netip.ParseAddr(addr)
		if err != nil || name == "" {
			return z, fmt.Errorf("world: --host %q: want NAME=ADDRESS", h)
		}
		z.Hosts[strings.ToLower(name)] = a
	}
	for _, al := range c.Aliases {
		name, target, _ := strings.Cut(al, "=")
		if name == "" || target == "" {
			return z, fmt.Errorf("world: --alias %q: want NAME=TARGET", al)
		}
		z.Aliases[strings.ToLower(name)] = strings.ToLower(target)
	}
	return z, nil
}

// Validate reports the first missing or invalid setting.
func (c Config) Validate() error {
	switch {
	case len(c.Addrs) == 0:
		return errors.New("world: --addr is required")
	case c.HTTPPort < 0 || c.HTTPPort > 65535 || c.HTTPSPort < 0 || c.HTTPSPort > 65535 || c.DNSPort < 0 || c.DNSPort > 65535:
		return fmt.Errorf("world: ports %d, %d and %d: out of range", c.HTTPPort, c.HTTPSPort, c.DNSPort)
	case c.CertFile == "" || c.KeyFile == "":
		return errors.New("world: --cert and --key are required")
	}
	return nil
}

// Server holds the world's listeners until Serve closes them.
type Server struct {
	http, https []net.Listener
	tls         *tls.Config
	dns         *DNSServer // nil without hosts
}

// Listen opens the listeners of every address, so that a port taken is an error
// at once; Serve answers on them.
func Listen(c Config) (*Server, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	zone, err := c.zone()
	if err != nil {
		return nil, err
	}
	s := &Server{tls: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	listen := func(a netip.Addr, port int) (net.Listener, error) {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("world: %w", err)
		}
		return ln, nil
	}
	for _, a := range c.Addrs {
		ln, err := listen(a, c.HTTPPort)
		if err != nil {
			return nil, err
		}
		s.http = append(s.http, ln)
		if ln, err = listen(a, c.HTTPSPort); err != nil {
			return nil, err
		}
		s.https = append(s.https, ln)
	}
	if len(zone.Hosts) > 0 {
		if s.dns, err = ListenDNS(netip.AddrPortFrom(c.Addrs[0], uint16(c.DNSPort)), zone); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// DNSAddr is where the server answers DNS; invalid without hosts.
func (s *Server) DNSAddr() netip.AddrPort {
	if s.dns == nil {
		return netip.AddrPort{}
	}
	return s.dns.Addr()
}

// HTTPAddrs and HTTPSAddrs are where the server listens, in the order of its
// Config's Addrs.
func (s *Server) HTTPAddrs() []netip.AddrPort  { return addrPorts(s.http) }
func (s *Server) HTTPSAddrs() []netip.AddrPort { return addrPorts(s.https) }

func addrPorts(lns []net.Listener) []netip.AddrPort {
	var out []netip.AddrPort
	for _, ln := range lns {
		out = append(out, ln.Addr().(*net.TCPAddr).AddrPort())
	}
	return out
}

// Close closes every listener.
func (s *Server) Close() {
	for _, ln := range append(s.http, s.https...) {
		ln.Close()
	}
	if s.dns != nil {
		s.dns.Close()
	}
}

// Serve answers on every listener until ctx is done or one of them fails.
//
// Plain and TLS listeners get a server each: net/http settles HTTP/2 once per
// server, on whichever Serve or ServeTLS runs first, so a server shared by both
// kinds would sometimes offer h2 in ALPN and then drop the connections that
// take it, with nothing logged.
func (s *Server) Serve(ctx context.Context, log *slog.Logger) error {
	newServer := func(tlsConfig *tls.Config) *http.Server {
		return &http.Server{
			Handler:           http.HandlerFunc(answer),
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       time.Minute,
			TLSConfig:         tlsConfig,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}
	plain, secure := newServer(nil), newServer(s.tls)
	errs := make(chan error, len(s.http)+len(s.https)+1)
	if s.dns != nil {
		go func() { errs <- s.dns.Serve(log) }()
		defer s.dns.Close()
	}
	for _, ln := range s.http {
		go func() { errs <- plain.Serve(ln) }()
	}
	for _, ln := range s.https {
		go func() { errs <- secure.ServeTLS(ln, "", "") }()
	}
	log.Info("serving the world", "http", s.HTTPAddrs(), "https", s.HTTPSAddrs(), "dns", s.DNSAddr())
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	plain.Shutdown(sctx)
	secure.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// answer is 200 with the world's body, whatever the method or path: the suite asks
// for /, /index.html, or anything else a user tries.
func answer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(Body)))
	if r.Method != http.MethodHead {
		io.WriteString(w, Body)
	}
}

// addrsValue is a repeatable pflag.Value for addresses.
type addrsValue struct{ p *[]netip.Addr }

func (v addrsValue) String() string {
	if v.p == nil {
		return ""
	}
	s := ""
	for i, a := range *v.p {
		if i > 0 {
			s += ","
		}
		s += a.String()
	}
	return s
}

func (v addrsValue) Set(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return err
	}
	*v.p = append(*v.p, a)
	return nil
}

func (v addrsValue) Type() string { return "address" }
