package podruntime

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeTracker turns individual probe outcomes into a probe result, applying the
// success and failure thresholds: the result flips only after that many consecutive
// outcomes of the other kind.
type probeTracker struct {
	successThreshold, failureThreshold int
	successes, failures                int
	result                             bool
}

func newProbeTracker(p *corev1.Probe, initial bool) *probeTracker {
	t := &probeTracker{successThreshold: 1, failureThreshold: 3, result: initial}
	if p.SuccessThreshold > 0 {
		t.successThreshold = int(p.SuccessThreshold)
	}
	if p.FailureThreshold > 0 {
		t.failureThreshold = int(p.FailureThreshold)
	}
	return t
}

// observe records one outcome and returns the result and whether it changed.
func (t *probeTracker) observe(ok bool) (result, changed bool) {
	before := t.result
	if ok {
		t.successes++
		t.failures = 0
		if t.successes >= t.successThreshold {
			t.result = true
		}
	} else {
		t.failures++
		t.successes = 0
		if t.failures >= t.failureThreshold {
			t.result = false
		}
	}
	return t.result, t.result != before
}

// probeTiming returns the probe's initial delay, period and timeout with the API's
// defaults.
func probeTiming(p *corev1.Probe) (delay, period, timeout time.Duration) {
	period, timeout = 10*time.Second, time.Second
	if p.PeriodSeconds > 0 {
		period = time.Duration(p.PeriodSeconds) * time.Second
	}
	if p.TimeoutSeconds > 0 {
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	return time.Duration(p.InitialDelaySeconds) * time.Second, period, timeout
}

// startProbes runs the container's startup, liveness and readiness probes for one
// attempt until ctx ends. The returned channel closes when they have all stopped.
func (p *podState) startProbes(ctx context.Context, c *container, sandboxPID int, env []corev1.EnvVar) <-chan struct{} {
	done := make(chan struct{})
	start := time.Now()
	run := func(ctx context.Context, probe *corev1.Probe) bool {
		return p.probeOnce(ctx, c, probe, sandboxPID, env)
	}
	// Liveness and startup probes stop when the pod is being deleted, as the
	// kubelet's do; readiness probes go on until the container has stopped.
	untilDeleted := func() (context.Context, context.CancelFunc) {
		lctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(p.ctx, cancel)
		return lctx, func() { stop(); cancel() }
	}
	go func() {
		defer close(done)
		if sp := c.spec.StartupProbe; sp != nil {
			sctx, cancel := untilDeleted()
			ok := probeLoop(sctx, sp, start, false, run, func(res, _ bool) bool { return res })
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case !ok && p.ctx.Err() == nil:
				p.rt.log.Info("startup probe failed", "pod", p.key(), "container", c.spec.Name)
				p.killAsync(c)
				return
			}
			// Passed, or the pod is being deleted, which counts as started.
			p.mu.Lock()
			c.started = true
			p.mu.Unlock()
			c.markStarted()
			p.changed()
		}
		liveDone := make(chan struct{})
		go func() {
			defer close(liveDone)
			if lp := c.spec.LivenessProbe; lp != nil {
				lctx, cancel := untilDeleted()
				defer cancel()
				probeLoop(lctx, lp, start, true, run, func(res, _ bool) bool {
					if !res && lctx.Err() == nil {
						p.rt.log.Info("liveness probe failed", "pod", p.key(), "container", c.spec.Name)
						p.killAsync(c)
						return true
					}
					return false
				})
			}
		}()
		if rp := c.spec.ReadinessProbe; rp != nil {
			probeLoop(ctx, rp, start, false, run, func(res, changed bool) bool {
				if changed {
					p.mu.Lock()
					c.ready = res && c.state.Running != nil
					p.mu.Unlock()
					p.changed()
				}
				return false
			})
		} else {
			p.mu.Lock()
			c.ready = c.state.Running != nil
			p.mu.Unlock()
			p.changed()
		}
		<-liveDone
	}()
	return done
}

// probeLoop probes until stop returns true or ctx ends, and returns the last result.
func probeLoop(ctx context.Context, probe *corev1.Probe, start time.Time, initial bool,
	run func(context.Context, *corev1.Probe) bool, stop func(result, changed bool) bool) bool {
	delay, period, _ := probeTiming(probe)
	t := newProbeTracker(probe, initial)
	wait := time.Until(start.Add(delay))
	for {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return t.result
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			return t.result
		}
		res, changed := t.observe(run(ctx, probe))
		if stop(res, changed) {
			return res
		}
		wait = period
	}
}

// killAsync stops a container whose probe failed without waiting for it: the
// supervisor sees the exit and applies the restart policy.
func (p *podState) killAsync(c *container) {
	go p.stopContainer(c, p.gracePeriod())
}

func (p *podState) probeOnce(ctx context.Context, c *container, probe *corev1.Probe, sandboxPID int, env []corev1.EnvVar) bool {
	_, _, timeout := probeTiming(probe)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	switch {
	case probe.Exec != nil:
		err = p.execCheck(ctx, sandboxPID, c, env, probe.Exec.Command)
	case probe.TCPSocket != nil:
		var addr string
		if addr, err = p.probeAddr(c, probe.TCPSocket.Host, probe.TCPSocket.Port); err == nil {
			var conn net.Conn
			if conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr); err == nil {
				conn.Close()
			}
		}
	case probe.HTTPGet != nil:
		err = p.httpProbe(ctx, c, probe.HTTPGet)
	case probe.GRPC != nil:
		err = p.grpcProbe(ctx, probe.GRPC)
	default:
		err = fmt.Errorf("probe has no handler")
	}
	return err == nil
}

// execCheck runs argv in the container until it exits or ctx ends, and says how it
// ended. It has no output pipes: with them, Wait would also wait for any process
// the command left behind holding them (`sh -c "daemon & check"`), and a probe
// would neither time out nor run again until that one ended. The command runs in
// its own process group, killed when ctx ends and once the command has exited:
// there is no container cgroup here to end leftovers with the container.
func (p *podState) execCheck(ctx context.Context, sandboxPID int, c *container, env []corev1.EnvVar, argv []string) error {
	cmd := p.nsenterCmd(sandboxPID, c, env, argv)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		case <-exited:
		}
	}()
	err := cmd.Wait()
	close(exited)
	unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	if ctx.Err() != nil {
		return fmt.Errorf("timed out: %w", ctx.Err())
	}
	return err
}

// probeAddr resolves a probe's host (default: the pod IP) and port, which may name a
// container port.
func (p *podState) probeAddr(c *container, host string, port intstr.IntOrString) (string, error) {
	n := port.IntValue()
	if port.Type == intstr.String {
		n = 0
		for _, cp := range c.spec.Ports {
			if cp.Name == port.StrVal {
				n = int(cp.ContainerPort)
			}
		}
		if n == 0 {
			if v, err := strconv.Atoi(port.StrVal); err == nil {
				n = v
			}
		}
	}
	if n <= 0 || n > 65535 {
		return "", fmt.Errorf("invalid probe port %s", port.String())
	}
	if host == "" {
		f := p.facts()
		if len(f.PodIPs) == 0 {
			return "", fmt.Errorf("pod has no IP")
		}
		host = f.PodIPs[0].String()
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

func (p *podState) httpProbe(ctx context.Context, c *container, h *corev1.HTTPGetAction) error {
	addr, err := p.probeAddr(c, h.Host, h.Port)
	if err != nil {
		return err
	}
	scheme := strings.ToLower(string(h.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + addr + path)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/lab")
	req.Header.Set("Accept", "*/*")
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		// Probes do not verify certificates, as the kubelet does not.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("http probe status %d", resp.StatusCode)
	}
	return nil
}

func (p *podState) grpcProbe(ctx context.Context, g *corev1.GRPCAction) error {
	f := p.facts()
	if len(f.PodIPs) == 0 {
		return fmt.Errorf("pod has no IP")
	}
	addr := net.JoinHostPort(f.PodIPs[0].String(), strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	req := &healthpb.HealthCheckRequest{}
	if g.Service != nil {
		req.Service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, req)
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("grpc probe status %s", resp.GetStatus())
	}
	return nil
}
