package podruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/creack/pty"
	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"golang.org/x/sys/unix"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	utilexec "k8s.io/utils/exec"

	"github.com/cilium-go/cilium/lab/internal/netns"
)

// findContainer returns a pod's running container and the sandbox pid to enter.
func (rt *Runtime) findContainer(namespace, podName, name string) (*podState, *container, int, error) {
	p := rt.lookup(namespace, podName)
	if p == nil {
		return nil, nil, 0, errdefs.NotFoundf("pod %s/%s not found", namespace, podName)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range append(append([]*container(nil), p.containers...), p.initCtrs...) {
		if c.spec.Name != name {
			continue
		}
		if c.state.Running == nil || p.sandbox == nil {
			return nil, nil, 0, errdefs.InvalidInputf("container %s in pod %s/%s is not running", name, namespace, podName)
		}
		return p, c, p.sandbox.pid, nil
	}
	return nil, nil, 0, errdefs.NotFoundf("container %s not found in pod %s/%s", name, namespace, podName)
}

// RunInContainer runs cmd in the container's namespaces, working directory and
// environment. A non-zero exit comes back as utilexec.CodeExitError, which the
// exec endpoint turns into the exit code kubectl returns.
func (rt *Runtime) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	p, c, pid, err := rt.findContainer(namespace, podName, containerName)
	if err != nil {
		return err
	}
	if len(cmd) == 0 {
		return errdefs.InvalidInput("no command")
	}
	p.mu.Lock()
	env := c.env
	p.mu.Unlock()
	ex := p.nsenterCmd(pid, c, env, cmd)
	if attach.TTY() {
		err = runWithTTY(ctx, ex, attach)
	} else {
		err = runPiped(ctx, ex, attach)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", exitStatus(ee.ProcessState, nil)), Code: exitStatus(ee.ProcessState, nil)}
	}
	return err
}

func runPiped(ctx context.Context, cmd *exec.Cmd, attach api.AttachIO) error {
	if out := attach.Stdout(); out != nil {
		cmd.Stdout = out
	}
	if errw := attach.Stderr(); errw != nil {
		cmd.Stderr = errw
	}
	var stdinDone chan struct{}
	if in := attach.Stdin(); in != nil {
		w, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdinDone = make(chan struct{})
		go func() {
			defer close(stdinDone)
			io.Copy(w, in)
			w.Close()
		}()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	// A client that goes away takes the command and its children with it.
	stop := context.AfterFunc(ctx, func() { unix.Kill(-cmd.Process.Pid, unix.SIGKILL) })
	defer stop()
	return cmd.Wait()
}

func runWithTTY(ctx context.Context, cmd *exec.Cmd, attach api.AttachIO) error {
	cmd.Env = append(cmd.Env, "TERM=xterm")
	f, err := pty.Start(cmd)
	if err != nil {
		return err
	}
	defer f.Close()
	finished := make(chan struct{})
	go func() {
		for {
			select {
			case <-finished:
				return
			case <-ctx.Done():
				// pty.Start made the command a session (and group) leader.
				unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
				return
			case size, ok := <-attach.Resize():
				if !ok {
					return
				}
				pty.Setsize(f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
			}
		}
	}()
	if in := attach.Stdin(); in != nil {
		go io.Copy(f, in)
	}
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		if out := attach.Stdout(); out != nil {
			io.Copy(out, f)
		} else {
			io.Copy(io.Discard, f)
		}
	}()
	err = cmd.Wait()
	close(finished)
	// The pty's reader sees EIO once the last writer closed; wait for the tail of the output.
	f.Close()
	<-outDone
	return err
}

// AttachToContainer is not supported: containers' stdio goes to their log files.
func (rt *Runtime) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported by the lab runtime; use exec or logs")
}

// GetContainerLogs serves a container's log: the current attempt, or the previous one.
func (rt *Runtime) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	p := rt.lookup(namespace, podName)
	if p == nil {
		return nil, errdefs.NotFoundf("pod %s/%s not found", namespace, podName)
	}
	p.mu.Lock()
	var c *container
	for _, cc := range append(append([]*container(nil), p.containers...), p.initCtrs...) {
		if cc.spec.Name == containerName {
			c = cc
		}
	}
	if c == nil {
		p.mu.Unlock()
		return nil, errdefs.NotFoundf("container %s not found in pod %s/%s", containerName, namespace, podName)
	}
	attempt, done := int(c.restarts), c.exited
	if c.logPath == "" {
		p.mu.Unlock()
		return nil, errdefs.InvalidInputf("container %s in pod %s/%s is waiting to start", containerName, namespace, podName)
	}
	// Attempt n logs to n.log and n is the restart count when it started, so the
	// latest attempt (running, or dead and waiting for its restart) is at restarts.
	if opts.Previous {
		attempt--
		done = closedChan
	}
	p.mu.Unlock()
	if attempt < 0 {
		return nil, errdefs.InvalidInputf("previous terminated container %s in pod %s/%s not found", containerName, namespace, podName)
	}
	path := fmt.Sprintf("%s/logs/%s/%d.log", p.dir, containerName, attempt)
	if _, err := os.Stat(path); err != nil {
		return nil, errdefs.NotFoundf("log of container %s: %v", containerName, err)
	}
	r, w := io.Pipe()
	go func() {
		w.CloseWithError(renderLog(ctx, path, opts, done, w))
	}()
	return r, nil
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// PortForward connects stream to port on localhost inside the pod's network
// namespace (a host-network pod's is the node's), as containerd's CRI does: a
// listener on the pod's loopback alone is reached, as one on its IP.
func (rt *Runtime) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	p := rt.lookup(namespace, podName)
	if p == nil {
		return errdefs.NotFoundf("pod %s/%s not found", namespace, podName)
	}
	p.mu.Lock()
	netnsPath := p.netnsPath
	p.mu.Unlock()
	dial := (&net.Dialer{}).DialContext // the runtime runs in the node's namespace
	if !p.pod.Spec.HostNetwork {
		if netnsPath == "" {
			return errdefs.InvalidInputf("pod %s/%s has no network namespace yet", namespace, podName)
		}
		dial = netns.Dialer(netnsPath)
	}
	conn, err := dialLocalhost(ctx, dial, port)
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, podName, err)
	}
	defer conn.Close()
	defer stream.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(conn, stream); conn.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// dialLocalhost dials localhost:port over IPv4, then IPv6, as containerd does.
// One address at a time: a dial of both at once would race them from
// goroutines outside the namespace.
func dialLocalhost(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), port int32) (net.Conn, error) {
	p := strconv.Itoa(int(port))
	conn, err4 := dial(ctx, "tcp4", net.JoinHostPort("127.0.0.1", p))
	if err4 == nil {
		return conn, nil
	}
	conn, err6 := dial(ctx, "tcp6", net.JoinHostPort("::1", p))
	if err6 == nil {
		return conn, nil
	}
	return nil, fmt.Errorf("dial localhost:%d: %w", port, errors.Join(err4, err6))
}

// GetStatsSummary is not implemented: the lab does not account resources per pod.
func (rt *Runtime) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errdefs.NotFound("stats are not collected by the lab runtime")
}

// GetMetricsResource is not implemented, like GetStatsSummary.
func (rt *Runtime) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errdefs.NotFound("metrics are not collected by the lab runtime")
}
