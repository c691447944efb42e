package nodeagent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeStatus reports the node Ready once a pod network is configured, like a kubelet
// whose container runtime says the network plugin is ready.
type nodeStatus struct {
	network interface{ Ready() error }
	log     *slog.Logger

	mu    sync.Mutex
	node  *corev1.Node
	cb    func(*corev1.Node)
	ready *bool
}

func newNodeStatus(n corev1.Node, network interface{ Ready() error }, log *slog.Logger) *nodeStatus {
	return &nodeStatus{node: n.DeepCopy(), network: network, log: log}
}

// Ping implements node.NodeProvider.
func (s *nodeStatus) Ping(context.Context) error { return nil }

// NotifyNodeStatus implements node.NodeProvider.
func (s *nodeStatus) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	s.mu.Lock()
	s.cb = cb
	s.mu.Unlock()
}

func (s *nodeStatus) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check compares the network's readiness with the last report and reports a change.
func (s *nodeStatus) check() {
	err := s.network.Ready()
	ready := err == nil
	s.mu.Lock()
	if s.cb == nil || (s.ready != nil && *s.ready == ready) {
		s.mu.Unlock()
		return
	}
	s.ready = &ready
	now := metav1.Now()
	for i, c := range s.node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		c.LastTransitionTime, c.LastHeartbeatTime = now, now
		if ready {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "KubeletReady", "node agent is posting ready status"
		} else {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, "KubeletNotReady", "network plugin not ready: "+err.Error()
		}
		s.node.Status.Conditions[i] = c
	}
	n, cb := s.node.DeepCopy(), s.cb
	s.mu.Unlock()
	s.log.Info("node readiness", "ready", ready)
	cb(n)
}
