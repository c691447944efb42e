package testnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/api/client"
)

// AgentConfig says how to run a cilium-agent process for one node.
type AgentConfig struct {
	// Binary is a cilium-agent built from cmd/cilium-agent.
	Binary string
	// Dir holds the agent's state directory, socket and log; it is
	// created if need be.
	Dir string
	// NodeNS is the node's network namespace: the process runs inside
	// it and programs it, so nothing it does reaches the root namespace.
	NodeNS  string
	BPFRoot string
	// Args are further flags: --ipam-pod-cidr, --node-ipv4, --routing-mode.
	Args []string
}

// Agent is a running cilium-agent process.
type Agent struct {
	// Socket is the unix socket of its REST API, for cilium-cni and
	// pkg/api/client.
	Socket string
	// LogPath is the file its stderr and stdout go to.
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// StartAgent runs the agent inside c.NodeNS with its Prometheus listener
// off and returns once its health endpoint answers OK. On error the
// process is stopped again.
func StartAgent(ctx context.Context, c AgentConfig) (*Agent, error) {
	a := &Agent{Socket: filepath.Join(c.Dir, "run", "cilium.sock"), LogPath: filepath.Join(c.Dir, "agent.log"),
		exited: make(chan struct{})}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent dir: %w", err)
	}
	logf, err := os.Create(a.LogPath)
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	defer logf.Close() // the child holds its own copy
	args := append([]string{"--state-dir=" + filepath.Join(c.Dir, "state"), "--socket-path=" + a.Socket,
		"--bpf-root=" + c.BPFRoot, "--prometheus-serve-addr=", "--node-netns=" + c.NodeNS}, c.Args...)
	a.cmd = exec.Command(c.Binary, args...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	// A group of its own: a Ctrl-C at the terminal reaches the caller,
	// which then stops the agent in order, and not the agent directly.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process inherits the namespace of the thread that starts it.
	if err := netnamespace.Do(c.NodeNS, a.cmd.Start); err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	go func() {
		a.waitErr = a.cmd.Wait()
		close(a.exited)
	}()
	if err := a.waitHealthy(ctx, time.Minute); err != nil {
		return nil, errors.Join(err, a.Stop())
	}
	return a, nil
}

func (a *Agent) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := client.New(a.Socket)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		h, err := c.Healthz(ctx)
		if err == nil && h.OK {
			return nil
		}
		last = err
		select {
		case <-a.exited:
			return fmt.Errorf("agent exited while starting (%v): %s", a.waitErr, a.LogTail(20)) //nolint:errorlint // nil when the agent exited 0: shown, not wrapped
		case <-ctx.Done():
			return fmt.Errorf("agent not healthy (last: %v): %w\n%s", last, ctx.Err(), a.LogTail(20)) //nolint:errorlint // last is nil while healthz answers not OK: shown; the deadline is wrapped
		case <-tick.C:
		}
	}
}

// Pid is the agent's process id, e.g. for /proc/<pid>/status.
func (a *Agent) Pid() int { return a.cmd.Process.Pid }

// Stop asks the agent to stop (SIGTERM) and kills it after 30 seconds.
// Calling it again returns at once.
func (a *Agent) Stop() error {
	select {
	case <-a.exited:
		return a.exitErr()
	default:
	}
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal agent: %w", err)
	}
	select {
	case <-a.exited:
		return a.exitErr()
	case <-time.After(30 * time.Second):
	}
	a.cmd.Process.Kill()
	<-a.exited
	return fmt.Errorf("agent killed after 30s: %s", a.LogTail(20))
}

func (a *Agent) exitErr() error {
	if a.waitErr != nil {
		return fmt.Errorf("agent: %w: %s", a.waitErr, a.LogTail(20))
	}
	return nil
}

// LogTail is the last n lines of the agent's log, for error messages.
func (a *Agent) LogTail(n int) string {
	b, err := os.ReadFile(a.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
