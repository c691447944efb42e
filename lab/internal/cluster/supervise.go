package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/lab/internal/addons"
	"github.com/cilium-go/cilium/lab/internal/apply"
	"github.com/cilium-go/cilium/lab/internal/controlplane"
	"github.com/cilium-go/cilium/lab/internal/netns"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/proc"
	"github.com/cilium-go/cilium/lab/internal/record"
)

// Status is what the supervisor reports in status.json.
type Status struct {
	PID       int          `json:"pid"`
	Phase     string       `json:"phase"`
	Error     string       `json:"error,omitempty"`
	Processes []proc.State `json:"processes"`
	Updated   time.Time    `json:"updated"`
}

// Supervise is the body of `cilium-lab supervise`: it keeps every process of the lab
// running until ctx is done, forwards the host's API port into the control plane (and
// the UI's port to the hubble-ui Service) and keeps pod CIDR routes between the
// machines.
func Supervise(ctx context.Context, stateDir, binDir string, log *slog.Logger) error {
	p, err := plan.Load(stateDir)
	if err != nil {
		return err
	}
	l := layout{stateDir}
	rec := record.Open(l.record())
	if err := joinCgroup(rec, p); err != nil {
		return err
	}

	var phaseMu sync.Mutex
	phase, phaseErr := "starting control plane", ""
	sup := &proc.Supervisor{Log: log}
	writeStatus := func() {
		phaseMu.Lock()
		st := Status{PID: os.Getpid(), Phase: phase, Error: phaseErr, Processes: sup.States(), Updated: time.Now()}
		phaseMu.Unlock()
		b, _ := json.MarshalIndent(st, "", "  ")
		tmp := l.status() + ".tmp"
		if os.WriteFile(tmp, b, 0o644) == nil {
			os.Rename(tmp, l.status())
		}
	}
	setPhase := func(s string, err error) {
		phaseMu.Lock()
		phase, phaseErr = s, ""
		if err != nil {
			phaseErr = err.Error()
		}
		phaseMu.Unlock()
		writeStatus()
	}
	sup.OnChange = writeStatus

	cp := controlPlaneConfig(p, binDir)
	if err := forwardAPI(ctx, p, log); err != nil {
		return err
	}
	// The world needs nothing of the cluster.
	if s, ok := worldProcess(p, binDir); ok {
		sup.Start(ctx, s, 2*time.Second)
	}
	// etcd and the API server first: the controller manager exits while it cannot reach
	// the API, and each restart would cost it a back-off.
	cpProcs := controlplane.Processes(cp)
	for _, s := range cpProcs {
		if s.Name == "etcd" || s.Name == "kube-apiserver" {
			sup.Start(ctx, s, 5*time.Second)
		}
	}

	err = func() error {
		cfg, err := adminConfig(cp, p)
		if err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		if p.HostUIPort != 0 {
			// The UI is no reason to fail the lab.
			if err := forwardUI(ctx, p, cs, log); err != nil {
				log.Error("hubble-ui forwarder", "error", err)
			}
		}
		if err := waitAPI(ctx, cs); err != nil {
			return err
		}
		for _, s := range cpProcs {
			if s.Name != "etcd" && s.Name != "kube-apiserver" {
				sup.Start(ctx, s, 5*time.Second)
			}
		}
		setPhase("bootstrapping", nil)
		if err := retry(ctx, func() error { return controlplane.Bootstrap(ctx, cs) }); err != nil {
			return fmt.Errorf("bootstrap RBAC: %w", err)
		}
		dns, err := addons.CoreDNS(p.ClusterDNS, p.ClusterDomain, worldDNS(p))
		if err != nil {
			return err
		}
		applier, err := apply.New(cfg, apply.FieldManager)
		if err != nil {
			return err
		}
		if err := retry(ctx, func() error { return applier.Apply(ctx, dns) }); err != nil {
			return fmt.Errorf("cluster DNS: %w", err)
		}
		switch {
		case p.CNI == plan.CNICilium && p.CiliumAs == plan.CiliumAsPods:
			setPhase("installing cilium-go", nil)
			if err := installCilium(ctx, applier, p); err != nil {
				return err
			}
		case p.CNI == plan.CNICilium:
			setPhase("starting cilium-go", nil)
			if err := startCilium(ctx, cs, applier, sup, p, cp, binDir, log); err != nil {
				return err
			}
		}
		setPhase("starting nodes", nil)
		for _, n := range p.Nodes {
			for _, s := range nodeProcesses(p, n, cp, binDir) {
				sup.Start(ctx, s, 10*time.Second)
			}
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		go routeNodes(ctx, cs, dyn, p, log)
		return nil
	}()
	if err != nil {
		setPhase("failed", err)
		log.Error("lab start", "error", err)
	} else {
		setPhase("running", nil)
	}

	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				writeStatus()
			}
		}
	}()
	<-ctx.Done()
	setPhase("stopping", nil)
	sup.Wait()
	return err
}

// adminConfig is the admin's client configuration, dialling the API server from inside
// the control-plane namespace.
func adminConfig(cp controlplane.Config, p plan.Plan) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", controlplane.AdminKubeconfig(cp))
	if err != nil {
		return nil, err
	}
	cfg.Dial = netns.Dialer(p.ControlPlaneNS)
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

func waitAPI(ctx context.Context, cs kubernetes.Interface) error {
	return retry(ctx, func() error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// retry calls fn until it succeeds or ctx is done.
func retry(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// forwardAPI listens on the host's loopback and relays every connection, untouched
// (TLS end to end), to the API server inside the control-plane namespace.
func forwardAPI(ctx context.Context, p plan.Plan, log *slog.Logger) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.HostAPIPort)))
	if err != nil {
		return fmt.Errorf("API forwarder: %w", err)
	}
	dial := netns.Dialer(p.ControlPlaneNS)
	target := net.JoinHostPort(p.ControlPlaneIP.String(), strconv.Itoa(p.APIPort))
	go forward(ctx, ln, func(ctx context.Context) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return dial(ctx, "tcp", target)
	}, log.With("forwarder", "API"))
	return nil
}

// joinCgroup moves the supervisor into the lab's cgroup v2 directory and makes each
// node's cgroup below it. Every process of the lab descends from the supervisor, so
// teardown can kill them all at once, even after a crash, with cgroup.kill.
func joinCgroup(rec *record.Record, p plan.Plan) error {
	dir := p.Cgroup
	if dir == "" { // a plan from before the lab kept its cgroup in the plan
		root, err := cgroup2Root()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "cilium-lab-"+p.Name)
	}
	if err := makeCgroup(rec, dir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	for _, n := range p.Nodes {
		if n.Cgroup == "" {
			continue
		}
		if err := makeCgroup(rec, n.Cgroup); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

// makeCgroup records and creates a cgroup directory; one left by an earlier
// supervisor of the same lab is taken over.
func makeCgroup(rec *record.Record, dir string) error {
	if err := rec.Add(record.Entry{Kind: record.Cgroup, Path: dir}); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// cgroup2Root finds where the cgroup v2 hierarchy is mounted (alone, or beside v1).
func cgroup2Root() (string, error) {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.subtree_control")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no cgroup v2 hierarchy mounted at /sys/fs/cgroup or /sys/fs/cgroup/unified")
}
