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

	"github.com/fsnotify/fsnotify"

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

// AckSocket is the agent's socket for the proxy's acknowledgements of
// the policies it loaded, in the proxy's directory.
func AckSocket(dir string) string { return filepath.Join(dir, "policy.sock") }

// Ack tells the agent that the proxy judges by its policy of Run and
// Revision: the datapath may redirect the connections that policy
// judges to the proxy.
type Ack struct {
	Run      uint64 `json:"run"`
	Revision uint64 `json:"revision"`
}

// policyPoll is how often WatchPolicy looks at the file between the
// kernel's notifications, for a directory that is not there yet.
const policyPoll = time.Second

// WatchPolicy keeps p's policy that of the file at path, which the agent
// replaces whole whenever it changes (pkg/proxy/agent), until ctx ends,
// and acknowledges each policy it loads (Config.AckPolicy). A file that
// is missing or does not parse changes nothing: the proxy keeps judging
// by the policy it has, the agent down or not.
func WatchPolicy(ctx context.Context, path string, p *Proxy, log *slog.Logger) {
	if log == nil {
		log = p.cfg.Log
	}
	path = filepath.Clean(path)
	acks := &acker{send: p.cfg.AckPolicy, log: log, latest: make(chan Ack, 1)}
	if acks.send != nil {
		go acks.run(ctx)
	}
	changed := notifyChanges(ctx, path, log)
	var seen struct {
		mod  time.Time
		size int64
		b    []byte
	}
	// check loads the file when it changed: by its size or time, or, on
	// the kernel's word (force), by its bytes, as a replacement within
	// the file system's time granularity may have kept both.
	check := func(force bool) {
		st, err := os.Stat(path)
		if err != nil || (!force && st.ModTime().Equal(seen.mod) && st.Size() == seen.size) {
			return
		}
		seen.mod, seen.size = st.ModTime(), st.Size()
		b, err := os.ReadFile(path)
		if err != nil || bytes.Equal(b, seen.b) {
			return
		}
		seen.b = b
		pol, err := loadPolicy(b, p)
		if err != nil {
			log.Error("proxy policy", "path", path, "error", err)
			return
		}
		log.Info("proxy policy loaded", "path", path, "revision", pol.Revision)
		if pol.Run != 0 {
			acks.set(Ack{Run: pol.Run, Revision: pol.Revision})
		}
	}
	tick := time.NewTicker(policyPoll)
	defer tick.Stop()
	check(true)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			check(false)
		case <-changed:
			check(true)
		}
	}
}

func loadPolicy(b []byte, p *Proxy) (Policy, error) {
	var pol Policy
	if err := json.Unmarshal(b, &pol); err != nil {
		return pol, fmt.Errorf("decode: %w", err)
	}
	return pol, p.SetPolicy(pol)
}

// notifyChanges returns a channel that receives when the file at path
// may have changed, by the kernel's notifications on its directory;
// nil (never) without them.
func notifyChanges(ctx context.Context, path string, log *slog.Logger) <-chan struct{} {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("proxy policy: no change notifications, polling", "error", err)
		return nil
	}
	dir := filepath.Dir(path)
	out := make(chan struct{}, 1)
	poke := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	go func() {
		defer w.Close()
		retry := time.NewTicker(policyPoll)
		defer retry.Stop()
		watching := false
		for {
			if !watching {
				// Before the agent made the directory, or after it went.
				if watching = w.Add(dir) == nil; watching {
					poke()
				}
			}
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				switch {
				case ev.Name == path:
					poke()
				case ev.Name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename):
					_ = w.Remove(dir)
					watching = false
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("proxy policy: change notifications", "error", err)
			case <-retry.C:
			}
		}
	}()
	return out
}

// acker tells the agent of the latest policy the proxy loaded, again
// until the agent takes it or a newer one replaces it: the agent's
// socket may not be up yet when the proxy loads its first policy.
type acker struct {
	send   func(context.Context, Ack) error
	log    *slog.Logger
	latest chan Ack // holds one: set replaces what run has not taken
}

func (a *acker) set(ack Ack) {
	if a.send == nil {
		return
	}
	select {
	case <-a.latest:
	default:
	}
	a.latest <- ack
}

// How soon the acker tries the agent's socket again: soon after a
// restart, then less often while the agent stays away.
const (
	ackRetryMin = 50 * time.Millisecond
	ackRetryMax = 2 * time.Second
	ackTimeout  = 5 * time.Second
)

func (a *acker) run(ctx context.Context) {
	for {
		var ack Ack
		select {
		case <-ctx.Done():
			return
		case ack = <-a.latest:
		}
		retry := ackRetryMin
		for {
			sendCtx, cancel := context.WithTimeout(ctx, ackTimeout)
			err := a.send(sendCtx, ack)
			cancel()
			if err == nil {
				break
			}
			a.log.Debug("proxy policy: acknowledgement not taken", "revision", ack.Revision, "error", err)
			t := time.NewTimer(retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case ack = <-a.latest:
				t.Stop()
				retry = ackRetryMin
			case <-t.C:
				retry = min(2*retry, ackRetryMax)
			}
		}
	}
}

// LearnClient tells the agent's name manager of allowed answers over its
// unix socket (pkg/fqdn/agent): Config.Learn.
func LearnClient(socket string) func(context.Context, fqdn.Lookup) error {
	c := unixClient(socket)
	return func(ctx context.Context, l fqdn.Lookup) error { return post(ctx, c, "http://agent/v1/learn", l) }
}

// AckClient tells the agent of the policies the proxy loaded over its
// unix socket (pkg/proxy/agent): Config.AckPolicy.
func AckClient(socket string) func(context.Context, Ack) error {
	c := unixClient(socket)
	return func(ctx context.Context, a Ack) error { return post(ctx, c, "http://agent/v1/policy-ack", a) }
}

func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

// post sends v as JSON to the agent, which answers 204 when it took it.
func post(ctx context.Context, c *http.Client, url string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
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
