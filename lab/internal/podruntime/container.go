package podruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium-go/cilium/lab/internal/images"
	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// container is one container of a pod and its current attempt. Fields below mu-less
// comments are guarded by the pod's mu.
type container struct {
	spec     corev1.Container
	init     bool
	sidecar  bool // an init container with restartPolicy Always
	image    images.Image
	imageErr error
	backoff  backoff

	startedOnce sync.Once
	startedCh   chan struct{} // closed when the container first counts as started

	// guarded by podState.mu
	id       string
	state    corev1.ContainerState
	last     corev1.ContainerState
	restarts int32
	ready    bool
	started  bool
	final    bool
	stop     bool // no more restarts: the pod is finishing or being deleted
	proc     *os.Process
	exited   chan struct{} // closed when the current attempt's process has exited
	env      []corev1.EnvVar
	logPath  string
}

func newContainer(rt *Runtime, pod *corev1.Pod, spec *corev1.Container, init bool) *container {
	c := &container{
		spec:      *spec,
		init:      init,
		sidecar:   init && spec.RestartPolicy != nil && *spec.RestartPolicy == corev1.ContainerRestartPolicyAlways,
		backoff:   backoff{Initial: rt.cfg.BackoffInitial, Max: rt.cfg.BackoffMax, Reset: 10 * time.Minute},
		startedCh: make(chan struct{}),
		state:     corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
	}
	c.image, c.imageErr = rt.cfg.Images.Resolve(spec.Image)
	if c.imageErr == nil {
		// Keep the files the host has; a missing required one makes the image unusable.
		files := c.image.Files[:0:0]
		for _, f := range c.image.Files {
			_, err := os.Stat(f.Host)
			switch {
			case err == nil:
				files = append(files, f)
			case !f.Optional:
				c.imageErr = fmt.Errorf("image %s: binary %s is not built", spec.Image, f.Host)
			}
		}
		c.image.Files = files
	} else {
		c.imageErr = fmt.Errorf("image %s is not available in the lab: %w", spec.Image, c.imageErr)
	}
	return c
}

// workingDir is the container's workingDir, else its image's WORKDIR.
func (c *container) workingDir() string {
	if c.spec.WorkingDir != "" {
		return c.spec.WorkingDir
	}
	return c.image.WorkingDir
}

func (c *container) markStarted() { c.startedOnce.Do(func() { close(c.startedCh) }) }

// shouldRestart applies the pod's (or, for sidecars, the container's) restart policy.
func (p *podState) shouldRestart(c *container, exitCode int) bool {
	switch {
	case c.sidecar:
		return true
	case c.init:
		return p.pod.Spec.RestartPolicy != corev1.RestartPolicyNever && exitCode != 0
	case p.pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
		return false
	case p.pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// supervise runs a container until it is final: restarted per policy with back-off.
// It reports whether the last run succeeded.
func (p *podState) supervise(c *container) bool {
	if c.imageErr != nil {
		p.setWaiting(c, "ErrImagePull", c.imageErr.Error())
		p.warnEvent(c, "Failed", fmt.Sprintf("Failed to pull image %q: %v", c.spec.Image, c.imageErr))
		<-p.ctx.Done()
		return false
	}
	for {
		if p.ctx.Err() != nil {
			return false
		}
		exitCode, ran, err := p.runOnce(c)
		p.mu.Lock()
		stop := c.stop
		p.mu.Unlock()
		if p.ctx.Err() != nil || stop {
			return exitCode == 0 && err == nil
		}
		var delay time.Duration
		if err != nil {
			// The container could not be configured (a missing configMap key, say):
			// the kubelet retries without counting a restart.
			p.setWaiting(c, "CreateContainerConfigError", err.Error())
			delay = c.backoff.delay(0)
		} else {
			if !p.shouldRestart(c, exitCode) {
				p.mu.Lock()
				c.final = true
				p.mu.Unlock()
				p.changed()
				return exitCode == 0
			}
			if delay = c.backoff.delay(ran); delay > 0 {
				p.mu.Lock()
				c.last = c.state
				p.mu.Unlock()
				p.setWaiting(c, "CrashLoopBackOff",
					fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.spec.Name, p.pod.Name))
			}
		}
		select {
		case <-p.ctx.Done():
			return false
		case <-time.After(delay):
		}
	}
}

func (p *podState) setWaiting(c *container, reason, msg string) {
	p.mu.Lock()
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	p.mu.Unlock()
	p.changed()
}

// attempt is one run of a container's process.
type attempt struct {
	cmd     *exec.Cmd
	logs    *logFile
	logPath string
	env     []corev1.EnvVar
	pid     int // the sandbox's
	start   time.Time
	exited  chan struct{}
}

// runOnce starts one attempt of the container and waits for it to exit. err is set
// when the attempt could not start for a configuration reason.
func (p *podState) runOnce(c *container) (exitCode int, ran time.Duration, err error) {
	a, err := p.startAttempt(c)
	if err != nil {
		return 0, 0, err
	}
	probeCtx, stopProbes := context.WithCancel(p.alive)
	probesDone := p.startProbes(probeCtx, c, a.pid, a.env)

	waitErr := a.cmd.Wait()
	// The container's processes share its process group; without a PID namespace of
	// its own this is how they end together, as they would when a container's init dies.
	unix.Kill(-a.cmd.Process.Pid, unix.SIGKILL)
	stopProbes()
	<-probesDone
	a.logs.Close()
	exitCode = exitStatus(a.cmd.ProcessState, waitErr)
	end := time.Now()
	reason := "Completed"
	if exitCode != 0 {
		reason = "Error"
	}
	msg := p.terminationMessage(c, a.logPath, exitCode)
	p.mu.Lock()
	c.proc = nil
	c.ready = false
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:    int32(exitCode),
		Reason:      reason,
		StartedAt:   metav1.NewTime(a.start),
		FinishedAt:  metav1.NewTime(end),
		Message:     msg,
		ContainerID: "lab://" + c.id,
	}}
	close(a.exited)
	p.mu.Unlock()
	p.changed()
	return exitCode, end.Sub(a.start), nil
}

// startAttempt resolves the container's environment and command and starts it in
// the sandbox with its output going to the attempt's log file.
func (p *podState) startAttempt(c *container) (*attempt, error) {
	env, err := containerEnv(p.ctx, p.rt.src, p.apiPod(), &c.spec, p.facts())
	if err != nil {
		return nil, err
	}
	argv, err := containerArgv(c.image, &c.spec, env)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	sb := p.sandbox
	n := c.restarts
	if c.id != "" {
		n++
	}
	p.mu.Unlock()
	if sb == nil {
		return nil, errors.New("pod sandbox is not running")
	}
	if wd := c.workingDir(); wd != "" {
		// Like runc, create the working directory if the image lacks it.
		if dir, err := securejoin.SecureJoin(fmt.Sprintf("/proc/%d/root", sb.pid), wd); err == nil {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("working directory %s: %w", wd, err)
			}
		}
	}
	a := &attempt{env: env, pid: sb.pid, exited: make(chan struct{}),
		logPath: filepath.Join(p.dir, "logs", c.spec.Name, strconv.Itoa(int(n))+".log")}
	if a.logs, err = openLog(a.logPath); err != nil {
		return nil, err
	}
	a.cmd = p.nsenterCmd(sb.pid, c, env, argv)
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, stderr, err := a.logs.pipes(a.cmd)
	if err != nil {
		a.logs.Close()
		return nil, err
	}
	a.start = time.Now()
	startErr := a.cmd.Start()
	stdout.Close()
	stderr.Close()
	if startErr != nil {
		a.logs.Close()
		return nil, fmt.Errorf("start: %w", startErr)
	}
	p.mu.Lock()
	if c.id != "" {
		if c.state.Terminated != nil {
			c.last = c.state
		}
		c.restarts++
	}
	c.id = newID()
	c.proc, c.exited, c.env, c.logPath = a.cmd.Process, a.exited, env, a.logPath
	c.ready = false
	c.started = c.spec.StartupProbe == nil
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(a.start)}}
	if p.ctx.Err() != nil || c.stop {
		// Stopped while starting: whoever stops the pod may have looked for c.proc
		// before it was set.
		unix.Kill(-a.cmd.Process.Pid, unix.SIGKILL)
	}
	p.mu.Unlock()
	p.saveRecord()
	if c.spec.StartupProbe == nil {
		c.markStarted()
	}
	p.changed()
	return a, nil
}

func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return 128
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// nsenterCmd builds the command that runs argv inside the sandbox's namespaces with
// the container's working directory, user and environment.
func (p *podState) nsenterCmd(sandboxPID int, c *container, env []corev1.EnvVar, argv []string) *exec.Cmd {
	spec := &c.spec
	args := []string{"-t", strconv.Itoa(sandboxPID), "-n", "-m", "-u", "-i", "-r"}
	// nsenter opens --wd before it enters the namespaces, so the directory is named
	// through the sandbox's root, resolved inside it.
	podRoot := fmt.Sprintf("/proc/%d/root", sandboxPID)
	wd, err := securejoin.SecureJoin(podRoot, c.workingDir())
	if err != nil {
		wd = podRoot
	}
	args = append(args, "--wd="+wd)
	uid, gid := runAs(p.pod, spec, c.image.User, c.image.Group)
	if gid != nil {
		args = append(args, "-G", strconv.FormatInt(*gid, 10))
	}
	if uid != nil {
		args = append(args, "-S", strconv.FormatInt(*uid, 10))
	}
	args = append(args, "--")
	args = append(args, argv...)
	cmd := exec.Command(p.rt.cfg.NsenterPath, args...)
	cmd.Env = make([]string, 0, len(env))
	for _, e := range env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	return cmd
}

// runAs returns the user and group a container runs as: its securityContext's,
// else the pod's, else the image's user and group (may be nil), else root.
func runAs(pod *corev1.Pod, c *corev1.Container, imageUser, imageGroup *int64) (uid, gid *int64) {
	uid = imageUser
	var runAsGroup *int64
	var levels []struct{ user, group *int64 }
	if psc := pod.Spec.SecurityContext; psc != nil {
		levels = append(levels, struct{ user, group *int64 }{psc.RunAsUser, psc.RunAsGroup})
	}
	if sc := c.SecurityContext; sc != nil {
		levels = append(levels, struct{ user, group *int64 }{sc.RunAsUser, sc.RunAsGroup})
	}
	for _, sc := range levels {
		if sc.user != nil {
			uid = sc.user
		}
		if sc.group != nil {
			runAsGroup = sc.group
		}
	}
	switch {
	case runAsGroup != nil:
		return uid, runAsGroup
	case uid == imageUser:
		// The image's user comes with the image's group.
		return uid, imageGroup
	}
	return uid, nil
}

// markFinal stops restarts of c.
func (p *podState) markFinal(c *container) {
	p.mu.Lock()
	c.stop = true
	p.mu.Unlock()
}

// terminationMessage returns what the container left in /dev/termination-log (the
// pod's file; consumed so the next attempt starts empty) or, with
// FallbackToLogsOnError and a failure, the tail of its log.
func (p *podState) terminationMessage(c *container, logPath string, exitCode int) string {
	const maxMessage = 4096
	path := filepath.Join(p.dir, "etc", "termination-log")
	data, _ := os.ReadFile(path)
	if len(data) > 0 {
		os.Truncate(path, 0)
	}
	if len(data) == 0 && exitCode != 0 && c.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		var b strings.Builder
		renderLog(context.Background(), logPath, api.ContainerLogOpts{Tail: 80}, closedChan, &b)
		data = []byte(b.String())
	}
	if len(data) > maxMessage {
		data = data[len(data)-maxMessage:]
	}
	return string(data)
}
