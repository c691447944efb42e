package podruntime

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// warnEvent records a Warning Event about a container of the pod, as the
// kubelet does, where `kubectl describe pod` and `kubectl get events` show it
// (cilium-cli prints a stuck pod's events too). A failure to record is logged.
func (p *podState) warnEvent(c *container, reason, msg string) {
	now := metav1.Now()
	field := "spec.containers{" + c.spec.Name + "}"
	if c.init {
		field = "spec.initContainers{" + c.spec.Name + "}"
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", p.pod.Name, now.UnixNano()),
			Namespace: p.pod.Namespace,
		},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.pod.Namespace,
			Name: p.pod.Name, UID: p.pod.UID, FieldPath: field},
		Reason:              reason,
		Message:             msg,
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "kubelet", Host: p.rt.cfg.NodeName},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "kubelet",
		ReportingInstance:   p.rt.cfg.NodeName,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.rt.cfg.Client.CoreV1().Events(p.pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		p.rt.log.Warn("record event", "pod", p.key(), "reason", reason, "error", err)
	}
}
