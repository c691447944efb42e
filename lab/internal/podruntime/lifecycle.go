package podruntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// minStopGrace is what a container gets between SIGTERM and SIGKILL however long
// its preStop hook took, as the kubelet's minimum grace period.
const minStopGrace = 2 * time.Second

// stopContainer stops the container's current attempt as the kubelet kills a
// container: its preStop hook first, while the container keeps running and serving,
// then SIGTERM to its process group, and SIGKILL once the grace period is over
// (at least minStopGrace after SIGTERM). It returns when the attempt has exited.
func (p *podState) stopContainer(c *container, grace time.Duration) {
	p.mu.Lock()
	proc, exited := c.proc, c.exited
	p.mu.Unlock()
	if proc == nil {
		return
	}
	deadline := time.Now().Add(grace)
	if h := preStop(c); h != nil && grace > 0 {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		done := make(chan error, 1)
		go func() { done <- p.runHook(ctx, c, h) }()
		select {
		case err := <-done:
			if err != nil {
				p.rt.log.Warn("preStop hook failed", "pod", p.key(), "container", c.spec.Name, "error", err)
			}
		case <-exited: // the container is gone already: nothing left to prepare
		case <-ctx.Done():
			p.rt.log.Warn("preStop hook did not finish within the grace period", "pod", p.key(), "container", c.spec.Name)
		}
		cancel()
	}
	unix.Kill(-proc.Pid, unix.SIGTERM)
	select {
	case <-exited:
		return
	case <-time.After(max(time.Until(deadline), minStopGrace)):
	}
	unix.Kill(-proc.Pid, unix.SIGKILL)
	<-exited
}

func preStop(c *container) *corev1.LifecycleHandler {
	if c.spec.Lifecycle == nil {
		return nil
	}
	return c.spec.Lifecycle.PreStop
}

// runHook runs a lifecycle hook of the container until it is done or ctx ends: a
// command inside the container, an HTTP GET (to the pod IP by default, from the
// node, like an HTTP probe), or a sleep.
func (p *podState) runHook(ctx context.Context, c *container, h *corev1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		p.mu.Lock()
		sb, env := p.sandbox, c.env
		p.mu.Unlock()
		if sb == nil {
			return errors.New("pod sandbox is not running")
		}
		if err := p.execCheck(ctx, sb.pid, c, env, h.Exec.Command); err != nil {
			return fmt.Errorf("exec %q: %w", h.Exec.Command, err)
		}
		return nil
	case h.HTTPGet != nil:
		return p.httpProbe(ctx, c, h.HTTPGet)
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return nil
		}
	}
	return errors.New("hook has no handler the lab supports")
}
