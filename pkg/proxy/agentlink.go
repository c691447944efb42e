package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cilium-go/cilium/pkg/fqdn"
)

// The proxy's defaults, which the agent's flags share: ports of Cilium's
// proxy port range, and the directory beside the agent's API socket.
const (
	DefaultDNSPort         = 10001
	DefaultHTTPPort        = 10002
	DefaultHTTPIngressPort = 10003
	DefaultDir             = "/var/run/cilium/proxy"
)

// PolicyFile is the proxy's policy in its directory, which the agent
// writes.
func PolicyFile(dir string) string { return filepath.Join(dir, "policy.json") }

// LearnSocket is the agent's socket for the proxy's allowed DNS answers
// in the proxy's directory.
func LearnSocket(dir string) string { return filepath.Join(dir, "fqdn.sock") }

// WatchPolicy keeps p's policy that of the file at path, which the agent
// replaces whole whenever it changes (pkg/proxy/agent), until ctx ends.
// A file that is missing or does not parse changes nothing: the proxy
// keeps judging by the policy it has, the agent down or not.
func WatchPolicy(ctx context.Context, path string, p *Proxy, log *slog.Logger) {
	if log == nil {
		log = p.cfg.Log
	}
	var seen struct {
		mod  time.Time
		size int64
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := os.Stat(path); err == nil && (!st.ModTime().Equal(seen.mod) || st.Size() != seen.size) {
			if err := loadPolicy(path, p); err != nil {
				log.Error("proxy policy", "path", path, "error", err)
			} else {
				log.Info("proxy policy loaded", "path", path, "revision", p.Revision())
			}
			seen.mod, seen.size = st.ModTime(), st.Size()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func loadPolicy(path string, p *Proxy) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var pol Policy
	if err := json.Unmarshal(b, &pol); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return p.SetPolicy(pol)
}

// LearnClient tells the agent's name manager of allowed answers over its
// unix socket (pkg/fqdn/agent): Config.Learn.
func LearnClient(socket string) func(context.Context, fqdn.Lookup) error {
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	return func(ctx context.Context, l fqdn.Lookup) error {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/v1/learn", bytes.NewReader(b))
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("agent: %s: %s", resp.Status, bytes.TrimSpace(msg))
		}
		return nil
	}
}
