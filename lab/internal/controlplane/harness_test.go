package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/lab/internal/etcd"
	"github.com/cilium-go/cilium/lab/internal/proc"
)

// etcdChildEnv makes the test binary act as `cilium-lab etcd`: the privileged test
// runs etcd through the same flags the CLI registers, in the test's namespace,
// without needing the CLI to be built.
const etcdChildEnv = "CONTROLPLANE_TEST_ETCD_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(etcdChildEnv) == "1" {
		os.Exit(runEtcdChild(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func runEtcdChild(args []string) int {
	if len(args) == 0 || args[0] != "etcd" {
		fmt.Fprintf(os.Stderr, "etcd child: want subcommand etcd, got %q\n", args)
		return 2
	}
	cfg := etcd.DefaultConfig()
	fs := pflag.NewFlagSet("etcd", pflag.ContinueOnError)
	cfg.Flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := etcd.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %q: %v: %s", name, args, err, out)
	}
}

// newNetns creates a network namespace with loopback up and a device holding
// addr, and deletes it when the test ends. Nothing touches the root namespace.
func newNetns(t *testing.T, addr string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "cltest-" + hex.EncodeToString(b)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	// A veth pair with both ends in the namespace stands in for the underlay link
	// (the dummy driver is not always available).
	run(t, "ip", "-n", name, "link", "add", "uplink0", "type", "veth", "peer", "name", "uplink1")
	run(t, "ip", "-n", name, "addr", "add", addr, "dev", "uplink0")
	run(t, "ip", "-n", name, "link", "set", "uplink1", "up")
	run(t, "ip", "-n", name, "link", "set", "uplink0", "up")
	return filepath.Join("/run/netns", name)
}

// dialerIn returns a dial function whose sockets are created in the network
// namespace at nsPath. The dialing goroutine is locked to its thread while the thread
// is in the other namespace; if switching back fails the goroutine exits still
// locked, so the runtime discards the thread instead of reusing it.
func dialerIn(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			conn net.Conn
			err  error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			conn, back, err := dialFrom(ctx, nsPath, network, addr)
			if back {
				runtime.UnlockOSThread()
			}
			ch <- result{conn, err}
		}()
		r := <-ch
		return r.conn, r.err
	}
}

// dialFrom dials from nsPath on the current (locked) thread. back reports whether
// the thread is in its original namespace again.
func dialFrom(ctx context.Context, nsPath, network, addr string) (conn net.Conn, back bool, err error) {
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, err
	}
	defer orig.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("enter %s: %w", nsPath, err)
	}
	var d net.Dialer
	conn, err = d.DialContext(ctx, network, addr)
	if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, false, fmt.Errorf("leave %s: %w", nsPath, serr)
	}
	return conn, true, err
}

// process is a control-plane component started for a test.
type process struct {
	spec proc.Spec
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs spec with nsenter, as the supervisor will, and stops it when the test
// ends: SIGTERM, then SIGKILL if it has not exited in time.
func start(t *testing.T, spec proc.Spec, extraEnv ...string) *process {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(spec.LogFile), 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := append([]string{"--net=" + spec.Namespaces.Net, "--", spec.Path}, spec.Args...)
	cmd := exec.Command("nsenter", args...)
	cmd.Dir = spec.Dir
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}, spec.Env...)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = log, log
	// Pdeathsig: if the test binary dies, the component must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", spec.Name, err)
	}
	p := &process{spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
			t.Errorf("%s exited during the test: %v", spec.Name, cmd.ProcessState)
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- tail of %s log:\n%s", spec.Name, tail(spec.LogFile, 40))
		}
	})
	return p
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	parts := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}

// eventually polls cond until it returns nil or the deadline passes, and reports how
// long it took.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	begin := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return time.Since(begin)
		}
		if time.Since(begin) > timeout {
			t.Fatalf("%s: not done after %v: %v", what, timeout, err)
		}
		<-tick.C
	}
}

var errNotYet = errors.New("not yet")
