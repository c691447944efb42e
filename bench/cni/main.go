// Command cni benchmarks pod network setup on one node, in one run on one
// machine: the latency of CNI ADD for many pods at once through cilium-cni
// and a real cilium-agent process, against the CNI reference plugins
// bridge and host-local as the baseline, in interleaved rounds; and the
// agent's memory with 100 endpoints. It prints p50 and p99 of both, their
// ratio and the targets. Nodes and pods are network namespaces, with a
// bpffs and a temp directory of its own, all removed at the end, also
// after an error or Ctrl-C. It needs root and the built binaries:
// `make bench-cni`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// options are the command's flags.
type options struct {
	bin         string
	rounds      int
	pods        int
	endpoints   int
	routingMode string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory with cilium-agent and cilium-cni, and the reference plugins in its cni/ (make build-cilium build-cni)")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds of concurrent ADDs for each plugin")
	flag.IntVar(&o.pods, "pods", 50, "pods added at once in a round")
	flag.IntVar(&o.endpoints, "endpoints", 100, "endpoints the agent holds when its memory is read")
	flag.StringVar(&o.routingMode, "routing-mode", "native", "the agent's routing mode: native or tunnel")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// An interrupt cancels the ADDs under way; run then removes what it
	// made before the command exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/cni:", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	// The pod CIDRs are /24s.
	if o.pods < 1 || o.pods > 200 || o.endpoints < 1 || o.endpoints > 200 {
		return fmt.Errorf("-pods %d, -endpoints %d: each must be 1..200", o.pods, o.endpoints)
	}
	if o.rounds < 1 {
		return fmt.Errorf("-rounds %d: at least 1", o.rounds)
	}
	if o.routingMode != "native" && o.routingMode != "tunnel" {
		return fmt.Errorf("-routing-mode %q: native or tunnel", o.routingMode)
	}
	return nil
}

// binaries checks that the plugins and the agent are where -bin says.
func (o options) binaries() (dir string, err error) {
	dir, err = filepath.Abs(o.bin)
	if err != nil {
		return "", err
	}
	for _, f := range []string{"cilium-agent", "cilium-cni", "cni/bridge", "cni/host-local"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("%w (run make build-cilium build-cni)", err)
		}
	}
	return dir, nil
}

func run(ctx context.Context, log *slog.Logger, o options) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates namespaces, mounts a bpffs and runs the agent")
	}
	if err := o.validate(); err != nil {
		return err
	}
	bin, err := o.binaries()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-cni-")
	if err != nil {
		return err
	}
	// Undone in reverse: the agent stops before its namespace and bpffs
	// go, and the directory goes last.
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	closers = append(closers, func() error { return os.RemoveAll(dir) })
	onClose := func(f func() error) { closers = append(closers, f) }

	log.Info("starting the nodes", "dir", dir)
	b, err := newBed(ctx, dir, bin, o, onClose)
	if err != nil {
		return err
	}
	res, err := b.measure(ctx, log, o)
	if err != nil {
		return err
	}
	res.report(os.Stdout, o)
	return nil
}
