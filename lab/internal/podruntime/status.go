package podruntime

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// snapshot returns a deep copy of the pod with its current status.
func (p *podState) snapshot() *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod := p.apiPodLocked()
	pod.Status = p.statusLocked()
	return pod
}

func (p *podState) containerStatus(c *container) corev1.ContainerStatus {
	st := corev1.ContainerStatus{
		Name:                 c.spec.Name,
		State:                *c.state.DeepCopy(),
		LastTerminationState: *c.last.DeepCopy(),
		Ready:                c.ready && c.state.Running != nil,
		RestartCount:         c.restarts,
		Image:                c.spec.Image,
		ImageID:              c.image.ID,
	}
	if c.id != "" {
		st.ContainerID = "lab://" + c.id
	}
	started := c.started && c.state.Running != nil
	st.Started = &started
	if p.deleted && st.State.Terminated == nil {
		st.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown",
			Message: "the pod was deleted before the container ran",
		}}
		st.Ready, st.Started = false, new(bool)
	}
	if w := st.State.Waiting; w != nil && w.Reason == "ContainerCreating" {
		if p.creating != "ContainerCreating" {
			w.Message = p.creating
		}
		// Like the kubelet: containers after init containers wait in PodInitializing.
		if p.creating == "" && !c.init && len(p.initCtrs) > 0 && !p.initialized {
			w.Reason = "PodInitializing"
		}
	}
	return st
}

// statusLocked computes the pod status from its containers, like the kubelet's phase
// and condition rules. The caller holds p.mu.
func (p *podState) statusLocked() corev1.PodStatus {
	st := corev1.PodStatus{
		ObservedGeneration: p.pod.Generation,
		StartTime:          &p.startTime,
		QOSClass:           qosClass(p.pod),
	}
	f := p.factsLocked()
	if f.NodeIP.IsValid() {
		st.HostIP = f.NodeIP.String()
		st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}
	}
	for _, ip := range f.PodIPs {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip.String()})
	}
	if len(st.PodIPs) > 0 {
		st.PodIP = st.PodIPs[0].IP
	}
	for _, c := range p.initCtrs {
		st.InitContainerStatuses = append(st.InitContainerStatuses, p.containerStatus(c))
	}
	for _, c := range p.containers {
		st.ContainerStatuses = append(st.ContainerStatuses, p.containerStatus(c))
	}
	st.Phase = p.phaseLocked(st)
	if f := p.failure; f != nil {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, f.Reason, f.Message
	}

	allReady := len(st.ContainerStatuses) > 0
	for _, cs := range st.ContainerStatuses {
		allReady = allReady && cs.Ready
	}
	for _, cs := range st.InitContainerStatuses {
		for _, c := range p.initCtrs {
			if c.spec.Name == cs.Name && c.sidecar {
				allReady = allReady && cs.Ready
			}
		}
	}
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		allReady = false
	}
	sandboxReady := p.creating == "" && !p.finished && !p.deleted
	p.setCond(corev1.PodScheduled, true, "")
	p.setCond(corev1.PodReadyToStartContainers, sandboxReady, "")
	initReason := ""
	if !p.initialized {
		initReason = "ContainersNotInitialized"
	}
	p.setCond(corev1.PodInitialized, p.initialized || (st.Phase == corev1.PodSucceeded && len(p.initCtrs) == 0), initReason)
	readyReason := ""
	if !allReady {
		readyReason = "ContainersNotReady"
		if st.Phase == corev1.PodSucceeded {
			readyReason = "PodCompleted"
		}
	}
	p.setCond(corev1.ContainersReady, allReady, readyReason)
	// Ready also waits for the readiness gates, whose conditions others set in the
	// API server; they go out with the status unchanged.
	foreign := p.apiConditionsLocked()
	ready, reason, msg := gatedReady(p.pod.Spec.ReadinessGates, allReady, readyReason, foreign)
	p.setCond(corev1.PodReady, ready, reason)
	if c := p.conds[corev1.PodReady]; msg != "" {
		c.Message = msg
		p.conds[corev1.PodReady] = c
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized,
		corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		st.Conditions = append(st.Conditions, p.conds[t])
	}
	st.Conditions = append(st.Conditions, foreign...)
	return st
}

// setCond keeps a condition's transition time stable while its status does not change.
func (p *podState) setCond(t corev1.PodConditionType, ok bool, reason string) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	old, had := p.conds[t]
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: old.LastTransitionTime,
		ObservedGeneration: p.pod.Generation}
	if !had || old.Status != status {
		c.LastTransitionTime = metav1.Now()
	}
	p.conds[t] = c
}

// phaseLocked follows the kubelet: Pending until the init containers are done and
// every container has started once; Succeeded or Failed once every container is
// final; Running otherwise.
func (p *podState) phaseLocked(st corev1.PodStatus) corev1.PodPhase {
	for i, c := range p.initCtrs {
		if c.sidecar || p.initialized {
			continue
		}
		cs := st.InitContainerStatuses[i]
		if c.final && cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 {
			return corev1.PodFailed
		}
		if p.deleted {
			return corev1.PodFailed
		}
		return corev1.PodPending
	}
	var running, waitingNew, final, failed int
	for i, c := range p.containers {
		cs := st.ContainerStatuses[i]
		switch {
		case cs.State.Running != nil:
			running++
		case (c.final || p.deleted) && cs.State.Terminated != nil:
			final++
			if cs.State.Terminated.ExitCode != 0 {
				failed++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated == nil && cs.RestartCount == 0 &&
			(c.id == ""):
			waitingNew++
		}
	}
	n := len(p.containers)
	switch {
	case final == n && failed > 0:
		return corev1.PodFailed
	case final == n:
		return corev1.PodSucceeded
	case waitingNew > 0:
		return corev1.PodPending
	}
	return corev1.PodRunning
}

func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return corev1.PodQOSBestEffort
}
