package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// Socket-level balancing acts on the processes of a cgroup, and cgroup v2
// membership belongs to a whole process: the socket-LB client is this
// binary run again, born in the cgroup (CLONE_INTO_CGROUP), which runs a
// connect/request/close loop in the client pod's namespace and prints the
// latencies as one JSON object. The tc measurements run the same child
// outside the cgroup: a client in another process than the servers wakes
// them across processes, which costs more than within one, and every
// path must pay the same.

// sockClientEnv names the child's namespace; its duration and targets are
// its arguments. With countFailuresEnv set, a failed connection is
// counted and the loop goes on.
const (
	sockClientEnv    = "CILIUM_GO_BENCH_SERVICES_CLIENT_NETNS"
	countFailuresEnv = "CILIUM_GO_BENCH_SERVICES_COUNT_FAILURES"
)

// crrReport is what the child prints.
type crrReport struct {
	Latencies []time.Duration `json:"latencies_ns"`
	Elapsed   time.Duration   `json:"elapsed_ns"`
	Failed    int             `json:"failed"`
	Errors    []string        `json:"errors,omitempty"`
}

func sockClientMain(ns string, args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "socket-LB client: want a duration and targets")
		return 2
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "socket-LB client:", err)
		return 2
	}
	var targets []netip.AddrPort
	for _, a := range args[1:] {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "socket-LB client:", err)
			return 2
		}
		targets = append(targets, ap)
	}
	r, err := crrIn(ns, targets, d, os.Getenv(countFailuresEnv) != "")
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(crrReport{Latencies: r.Latencies, Elapsed: r.Elapsed, Failed: r.Failed, Errors: r.Errors})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "socket-LB client:", err)
		return 1
	}
	return 0
}

// crrIn runs connect/request/close from the namespace ns for d, dialing
// the targets in turn, after an untimed warm-up. The whole loop runs on a
// thread in ns (a socket belongs to the namespace of the thread that
// makes it), so that no connection pays for entering the namespace.
func crrIn(ns string, targets []netip.AddrPort, d time.Duration, countFailures bool) (traffic.CRR, error) {
	run := traffic.RunCRR
	if countFailures {
		run = traffic.RunCRRCountingFailures
	}
	i := 0
	dial := func() (net.Conn, error) {
		t := targets[i%len(targets)]
		i++
		return net.DialTimeout("tcp4", t.String(), dptest.ReplyWait)
	}
	var r traffic.CRR
	err := netnamespace.Do(ns, func() error {
		if _, err := run(dial, min(d/5, 200*time.Millisecond)); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		var err error
		r, err = run(dial, d)
		return err
	})
	return r, err
}

// crrInProcess runs crrIn in a child process, born in cgroup unless that
// is "".
func crrInProcess(ctx context.Context, cgroup, ns string, targets []netip.AddrPort, d time.Duration, countFailures bool) (traffic.CRR, error) {
	self, err := os.Executable()
	if err != nil {
		return traffic.CRR{}, err
	}
	args := []string{d.String()}
	for _, t := range targets {
		args = append(args, t.String())
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(), sockClientEnv+"="+ns)
	if countFailures {
		cmd.Env = append(cmd.Env, countFailuresEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	if cgroup != "" {
		dir, err := os.Open(cgroup)
		if err != nil {
			return traffic.CRR{}, err
		}
		defer dir.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	}
	out, err := cmd.Output()
	if err != nil {
		return traffic.CRR{}, fmt.Errorf("socket-LB client: %w", err)
	}
	var r crrReport
	if err := json.Unmarshal(out, &r); err != nil {
		return traffic.CRR{}, fmt.Errorf("socket-LB client output: %w", err)
	}
	return traffic.CRR{Latencies: r.Latencies, Elapsed: r.Elapsed, Failed: r.Failed, Errors: r.Errors}, nil
}
