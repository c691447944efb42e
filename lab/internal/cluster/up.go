package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/lab/internal/controlplane"
	"github.com/cilium-go/cilium/lab/internal/machine"
	"github.com/cilium-go/cilium/lab/internal/pki"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/record"
)

// UpOptions are the choices of `cilium-lab up` beyond the plan.
type UpOptions struct {
	Plan   plan.Options
	BinDir string
	// KeepOnFailure leaves a lab that failed to start in place for inspection.
	KeepOnFailure bool
	Timeout       time.Duration
	Out           io.Writer
}

// Up creates a lab and waits until its nodes are Ready and cluster DNS answers. If
// anything fails, everything created so far is removed again (unless KeepOnFailure).
func Up(ctx context.Context, o UpOptions) error {
	start := time.Now()
	root, err := cgroup2Root()
	if err != nil {
		return err
	}
	o.Plan.CgroupRoot = root
	p, err := plan.New(o.Plan)
	if err != nil {
		return err
	}
	if err := checkFree(p, o.BinDir); err != nil {
		return err
	}
	pr := progress{out: o.Out, start: start}
	err = up(ctx, p, o, &pr)
	if err != nil {
		pr.fail(err)
		if o.KeepOnFailure {
			fmt.Fprintf(o.Out, "the failed lab is left in %s for inspection; `cilium-lab down` removes it\n", p.StateDir)
			return err
		}
		showLogs(o.Out, p)
		if derr := Down(p.StateDir); derr != nil {
			return errors.Join(err, fmt.Errorf("clean up: %w", derr))
		}
		return err
	}
	fmt.Fprintf(o.Out, "\nThe lab is up in %s: %d nodes, CNI %s, kube-proxy %s.\n",
		time.Since(start).Round(100*time.Millisecond), len(p.Nodes), p.CNI, p.KubeProxy)
	fmt.Fprintf(o.Out, "  export KUBECONFIG=%s\n  %s get nodes -o wide\n", Kubeconfig(p.StateDir), filepath.Join(o.BinDir, "kubectl"))
	printUI(o.Out, p)
	return nil
}

// checkFree refuses to start over an existing lab or a taken port, naming the problem.
func checkFree(p plan.Plan, binDir string) error {
	if _, err := os.Stat(plan.File(p.StateDir)); err == nil {
		return fmt.Errorf("a lab already exists in %s: run `cilium-lab down` first", p.StateDir)
	}
	if entries, _ := record.Read(filepath.Join(p.StateDir, "record.json")); len(entries) > 0 {
		return fmt.Errorf("%s holds the remains of a lab: run `cilium-lab down` first", p.StateDir)
	}
	names := []string{p.UnderlayNetns, p.ControlPlaneNS, p.Outside.Netns}
	for _, n := range p.Nodes {
		names = append(names, n.Netns)
	}
	for _, ns := range names {
		if _, err := os.Stat(ns); err == nil {
			return fmt.Errorf("network namespace %s is in use: run `cilium-lab down` or pick another --name", ns)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.HostAPIPort)))
	if err != nil {
		return fmt.Errorf("port 127.0.0.1:%d is in use: pick another with --api-port", p.HostAPIPort)
	}
	ln.Close()
	bins := []string{"cilium-lab", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "agnhost", "coredns", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"}
	if p.CNI == plan.CNICilium {
		bins = append(bins, ciliumBinaries()...)
		if p.CiliumAs == plan.CiliumAsPods {
			bins = append(bins, "cilium-dbg")
		}
		if _, err := installRBAC(p.InstallDir); err != nil {
			return fmt.Errorf("--install-dir: %w", err)
		}
	}
	for _, b := range bins {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("%s is missing: run `make build` first", filepath.Join(binDir, b))
		}
	}
	if p.KubeProxy != "none" {
		if _, err := os.Stat(filepath.Join(binDir, "kube-proxy")); err != nil {
			return fmt.Errorf("%s is missing: run `make build` first", filepath.Join(binDir, "kube-proxy"))
		}
		tool := map[string]string{"iptables": "iptables", "nftables": "nft"}[p.KubeProxy]
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("kube-proxy in %s mode needs %s (Debian: apt-get install %s)", p.KubeProxy, tool, p.KubeProxy)
		}
	}
	return nil
}

func up(ctx context.Context, p plan.Plan, o UpOptions, pr *progress) error {
	l := layout{p.StateDir}
	if err := os.MkdirAll(p.StateDir, 0o700); err != nil {
		return err
	}
	rec := record.Open(l.record())
	if err := rec.Add(record.Entry{Kind: record.Dir, Path: p.StateDir}); err != nil {
		return err
	}
	if err := p.Save(); err != nil {
		return err
	}

	pr.step("certificates")
	ca, err := pki.LoadOrCreateCA(l.pki(), "cilium-lab-"+p.Name)
	if err != nil {
		return err
	}
	cp := controlPlaneConfig(p, o.BinDir)
	if err := controlplane.Prepare(cp, ca); err != nil {
		return err
	}
	if err := ensureWorldCert(p, ca); err != nil {
		return fmt.Errorf("world: %w", err)
	}
	for _, n := range p.Nodes {
		if _, err := controlplane.NodeCredentials(cp, ca, n.Name, n.IP); err != nil {
			return err
		}
	}
	if p.CNI == plan.CNICilium && p.CiliumAs == plan.CiliumAsProcesses {
		// As pods, the operator issues them (hubble-tls-auto).
		if err := ensureHubbleCerts(p); err != nil {
			return err
		}
	}
	if err := controlplane.WriteAdminKubeconfig(cp, ca, l.kubeconfig(),
		"https://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(p.HostAPIPort))); err != nil {
		return err
	}

	pr.step("namespaces and links")
	self := filepath.Join(o.BinDir, "cilium-lab")
	if err := (machine.Builder{Plan: p, Record: rec, Self: self}).Create(); err != nil {
		return err
	}
	if err := installCNIPlugins(p, o.BinDir); err != nil {
		return err
	}
	if p.CNI == plan.CNICilium && p.CiliumAs == plan.CiliumAsProcesses {
		// As pods, the agent's init container installs it.
		if err := installCiliumCNI(p, o.BinDir); err != nil {
			return err
		}
	}
	if err := writeNodeConfigs(p, cp); err != nil {
		return err
	}

	pr.step("supervisor")
	exited, err := startSupervisor(p, rec, self, o.BinDir)
	if err != nil {
		return err
	}
	// Every wait below also ends when the supervisor has given up or died.
	alive := func() error {
		select {
		case err := <-exited:
			return backoffStop{fmt.Errorf("the supervisor exited (%v): see %s", err, filepath.Join(l.logs(), "supervisor.log"))} //nolint:errorlint // nil when the supervisor exited 0: shown, not wrapped
		default:
		}
		if err := supervisorFailed(l); err != nil {
			return backoffStop{err}
		}
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig())
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pr.step("API server")
	if err := pr.waitFor(ctx, func() error {
		if err := alive(); err != nil {
			return err
		}
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return err
	}
	pr.step(fmt.Sprintf("%d nodes Ready", len(p.Nodes)))
	if err := pr.waitFor(ctx, func() error { return errors.Join(alive(), nodesReady(ctx, cs, len(p.Nodes))) }); err != nil {
		return err
	}
	if !servicesImplemented(p) {
		// CoreDNS reaches the API server through its Service: it cannot get ready.
		pr.done()
		fmt.Fprintf(o.Out, "No Service load-balancing (--cni=%s, --kube-proxy=none): cluster DNS is not waited for.\n", p.CNI)
		return nil
	}
	pr.step("cluster DNS")
	if err := pr.waitFor(ctx, func() error {
		return errors.Join(alive(), deploymentAvailable(ctx, cs, "kube-system", "coredns"))
	}); err != nil {
		return err
	}
	if p.CNI == plan.CNICilium && p.CiliumAs == plan.CiliumAsPods {
		pr.step("cilium-go pods")
		if err := pr.waitFor(ctx, func() error {
			return errors.Join(alive(), daemonSetReady(ctx, cs, ciliumNamespace, agentDaemonSet),
				deploymentAvailable(ctx, cs, ciliumNamespace, operatorDeployment),
				deploymentAvailable(ctx, cs, ciliumNamespace, relayDeployment),
				deploymentAvailable(ctx, cs, ciliumNamespace, uiDeployment),
				writeHubbleCLICerts(ctx, cs, p))
		}); err != nil {
			return err
		}
	}
	if p.CNI == plan.CNICilium {
		if err := writeRelayAddress(ctx, cs, p); err != nil {
			return err
		}
	}
	pr.done()
	return nil
}

// servicesImplemented says whether anything in the lab load-balances Services:
// kube-proxy, or cilium-go, which is to replace it. The reference bridge CNI
// without kube-proxy has no Services at all.
func servicesImplemented(p plan.Plan) bool {
	return p.KubeProxy != "none" || p.CNI == plan.CNICilium
}

// installCNIPlugins copies the reference plugins into every node's /opt/cni/bin.
func installCNIPlugins(p plan.Plan, binDir string) error {
	for _, n := range p.Nodes {
		dst := filepath.Join(n.Dir, "opt-cni-bin")
		for _, name := range []string{"bridge", "host-local", "loopback", "portmap"} {
			if err := copyFile(filepath.Join(binDir, "cni", name), filepath.Join(dst, name), 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// startSupervisor starts `cilium-lab supervise` in its own session, so it outlives `up`.
// The channel receives its exit status should it end while `up` still runs.
func startSupervisor(p plan.Plan, rec *record.Record, self, binDir string) (<-chan error, error) {
	l := layout{p.StateDir}
	if err := os.MkdirAll(l.logs(), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(l.logs(), "supervisor.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(self, "supervise", "--state-dir", p.StateDir, "--bin-dir", binDir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	startTime, err := record.StartTime(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	if err := rec.Add(record.Entry{Kind: record.Process, PID: cmd.Process.Pid, Start: startTime}); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}

// backoffStop ends a wait early with an error that will not go away by waiting.
type backoffStop struct{ error }

func supervisorFailed(l layout) error {
	st, err := ReadStatus(l.state)
	if err != nil || st.Phase != "failed" {
		return nil
	}
	return fmt.Errorf("supervisor: %s", st.Error)
}

func nodesReady(ctx context.Context, cs kubernetes.Interface, want int) error {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready < want {
		return fmt.Errorf("%d of %d nodes Ready", ready, want)
	}
	return nil
}

func deploymentAvailable(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && d.Status.ReadyReplicas > 0 {
			return nil
		}
	}
	return fmt.Errorf("deployment %s/%s: %d of %d replicas ready", ns, name, d.Status.ReadyReplicas, d.Status.Replicas)
}
