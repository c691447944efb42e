// Command cilium-proxy is the layer-7 proxy on a node (pkg/proxy): the DNS
// and HTTP proxies that the datapath sends the connections of allows with
// layer-7 rules to. It runs apart from the agent, so that an agent
// restart or upgrade loses no lookup and no request: it judges by the
// policy file the agent writes (and keeps the last one while the agent
// is away), tells the agent which policy it judges by, so that the
// datapath redirects no connection that the proxy's policy does not know
// yet, tells the agent's name manager of allowed DNS answers and its
// Hubble of every request and response, and names peers by the node's
// pinned ipcache.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/pkg/proxy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

type config struct {
	dnsPort, httpPort, httpIngressPort uint16
	dir, bpfRoot                       string
	learnWait                          time.Duration
	debug                              bool
}

func newCommand() *cobra.Command {
	c := &config{}
	cmd := &cobra.Command{Use: "cilium-proxy", Short: "The node's layer-7 proxy (DNS and HTTP)", Args: cobra.NoArgs, SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context()) }}
	fs := cmd.Flags()
	fs.Uint16Var(&c.dnsPort, "tofqdns-proxy-port", proxy.DefaultDNSPort, "port of the DNS proxy (UDP and TCP): the agent's flag of the same name")
	fs.Uint16Var(&c.httpPort, "proxy-http-port", proxy.DefaultHTTPPort, "port of the HTTP proxy for egress rules: the agent's flag of the same name")
	fs.Uint16Var(&c.httpIngressPort, "proxy-http-ingress-port", proxy.DefaultHTTPIngressPort,
		"port of the HTTP proxy for ingress rules: the agent's flag of the same name")
	fs.StringVar(&c.dir, "proxy-dir", proxy.DefaultDir, "directory of the agent's policy file and sockets for the proxy")
	fs.StringVar(&c.bpfRoot, "bpf-root", "/sys/fs/bpf/cilium", "the agent's --bpf-root, where the node's ipcache is pinned")
	fs.DurationVar(&c.learnWait, "tofqdns-proxy-response-max-delay", proxy.DefaultLearnWait,
		"how long an allowed DNS answer waits for the datapath to allow its addresses")
	fs.BoolVar(&c.debug, "debug", false, "log every upstream error")
	return cmd
}

func (c *config) run(ctx context.Context) error {
	level := slog.LevelInfo
	if c.debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ipc, err := openIPCache(ctx, c.bpfRoot, log)
	if err != nil {
		return err
	}
	defer ipc.Close()
	// Every request and response goes to the agent's Hubble; while the
	// agent is away they are dropped, never waited for.
	records := accesslog.NewSender(accesslog.SocketFile(c.dir), 0, log)
	go records.Run(ctx)
	p := proxy.New(proxy.Config{DNSPort: c.dnsPort, HTTPPort: c.httpPort, HTTPIngressPort: c.httpIngressPort, IdentityOf: ipc.IdentityOf,
		Learn: proxy.LearnClient(proxy.LearnSocket(c.dir)), LearnWait: c.learnWait, Record: records.Record,
		AckPolicy: proxy.AckClient(proxy.AckSocket(c.dir)), Log: log})
	go proxy.WatchPolicy(ctx, proxy.PolicyFile(c.dir), p, log)
	go func() {
		select {
		case <-p.Ready():
			log.Info("serving", "dns-port", c.dnsPort, "http-port", c.httpPort, "http-ingress-port", c.httpIngressPort, "dir", c.dir)
		case <-ctx.Done():
		}
	}()
	return p.Run(ctx)
}

// openIPCache waits for the agent to pin the ipcache on a new node.
func openIPCache(ctx context.Context, bpfRoot string, log *slog.Logger) (*proxy.IPCache, error) {
	for {
		ipc, err := proxy.OpenIPCache(bpfRoot)
		if err == nil {
			return ipc, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", filepath.Join(bpfRoot, "maps"), err)
		}
		log.Info("waiting for the agent to pin the ipcache", "bpf-root", bpfRoot)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
