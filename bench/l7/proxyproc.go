package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/proxy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// The proxy runs in a process of its own, the benchmark's child, as
// cilium-proxy does: started in node 1's network namespace, it opens its
// sockets there as the node's proxy opens them in the host's, without
// entering a namespace for each; it shares neither the Go scheduler nor
// the garbage collector with the clients and servers. It is
// cilium-proxy's setup (cmd/cilium-proxy): the node's pinned ipcache,
// the policy file the agent writes (proxy.WatchPolicy), the agent's
// socket for allowed answers (proxy.LearnClient) and the access log's
// (accesslog.Sender), with two changes: Learn can be switched off, and
// Record counts what it records before sending it on. The parent writes
// the configuration as a line of JSON on the child's stdin, then
// requests, one a line; the child answers each with a line of JSON and
// exits when its stdin closes.

type proxyConfig struct {
	NetNS   string // the namespace it must find itself in
	BPFRoot string // node 1's, where its ipcache is pinned
	Dir     string // the agent's directory for the proxy
	Profile string // where it writes its CPU profile, if set
}

// Requests.
const (
	askCounts     = "counts"
	askLearnAgent = "learn-agent" // Learn tells the agent
	askLearnNone  = "learn-none"  // Learn does nothing
)

type proxyReply struct {
	Counts   counts
	Relayed  int64         // connections the relay path's relay took
	Revision uint64        // of the policy it judges by
	CPU      time.Duration // its CPU time so far
	Err      string
}

// proxyProc is the parent's handle on the child.
type proxyProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startProxy(cfg proxyConfig) (p *proxyProc, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-proxy")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// A child is born in the namespace of the thread that forks it.
	if err := netnamespace.Do(cfg.NetNS, cmd.Start); err != nil {
		return nil, fmt.Errorf("start the proxy process: %w", err)
	}
	p = &proxyProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	line, err := json.Marshal(cfg)
	if err == nil {
		_, err = fmt.Fprintf(in, "%s\n", line)
	}
	if err != nil {
		return p, errors.Join(err, p.close())
	}
	// Wait for it to judge by the agent's policy.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := p.ask(askCounts)
		if err != nil {
			return p, errors.Join(err, p.close())
		}
		if r.Revision > 0 {
			return p, nil
		}
		if time.Now().After(deadline) {
			return p, errors.Join(errors.New("the proxy process loaded no policy"), p.close())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proxyProc) ask(req string) (proxyReply, error) {
	var r proxyReply
	if _, err := fmt.Fprintln(p.in, req); err != nil {
		return r, fmt.Errorf("proxy process: %w", err)
	}
	if !p.out.Scan() {
		return r, fmt.Errorf("proxy process: no answer to %s: %v", req, p.out.Err()) //nolint:errorlint // nil at EOF: shown, not wrapped
	}
	if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("proxy process: %w", err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("proxy process: %s", r.Err)
	}
	return r, nil
}

// close ends the child: its stdin closes, and it stops.
func (p *proxyProc) close() error {
	p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("proxy process: %w", err)
	}
	return nil
}

// runProxy is the child.
func runProxy(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewScanner(stdin)
	if !in.Scan() {
		return errors.New("no configuration on stdin")
	}
	var cfg proxyConfig
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if err := checkNetNS(cfg.NetNS); err != nil {
		return err
	}
	if cfg.Profile != "" {
		f, err := os.Create(cfg.Profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	ipc, err := proxy.OpenIPCache(cfg.BPFRoot)
	if err != nil {
		return err
	}
	defer ipc.Close()
	records := accesslog.NewSender(accesslog.SocketFile(cfg.Dir), 0, log)
	go records.Run(ctx)
	var (
		seen    seen
		toAgent atomic.Bool
	)
	tell := proxy.LearnClient(proxy.LearnSocket(cfg.Dir))
	p := proxy.New(proxy.Config{DNSPort: dnsProxyPort, HTTPPort: httpProxyPort, IdentityOf: ipc.IdentityOf,
		Learn: func(ctx context.Context, l fqdn.Lookup) error {
			if toAgent.Load() {
				return tell(ctx, l)
			}
			return nil
		},
		Record: func(r accesslog.Record) {
			seen.record(r)
			records.Record(r)
		},
		UpstreamTimeout: dptest.ReplyWait, Log: log})
	go proxy.WatchPolicy(ctx, proxy.PolicyFile(cfg.Dir), p, log)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		return fmt.Errorf("the proxy stopped: %w", err)
	}
	var relayed atomic.Int64
	rl, err := relay(ctx, ipc.IdentityOf, &relayed)
	if err != nil {
		return err
	}
	defer rl.Close()

	enc := json.NewEncoder(stdout)
	for in.Scan() {
		var r proxyReply
		select {
		case err := <-done:
			r.Err = fmt.Sprintf("the proxy stopped: %v", err)
			done <- err
		default:
		}
		switch req := in.Text(); req {
		case askCounts:
		case askLearnAgent, askLearnNone:
			toAgent.Store(req == askLearnAgent)
		default:
			r.Err = "unknown request " + req
		}
		r.Counts, r.Relayed, r.Revision, r.CPU = seen.snapshot(), relayed.Load(), p.Revision(), cpuTime()
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	cancel()
	return <-done
}

// checkNetNS makes sure the process is in the namespace at path: the
// fork in it did what it should.
func checkNetNS(path string) error {
	inode := func(p string) (uint64, error) {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return 0, fmt.Errorf("stat %s: %w", p, err)
		}
		return st.Ino, nil
	}
	want, err := inode(path)
	if err != nil {
		return err
	}
	got, err := inode("/proc/self/ns/net")
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the proxy process is in network namespace %d, not node 1's (%d)", got, want)
	}
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
