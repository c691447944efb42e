package podruntime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// The pod conditions a node writes, as the kubelet owns them. Every other condition
// in a pod's status belongs to someone else (a readiness gate's controller, the
// disruption controller) and the node only carries it along.
var nodeConditions = []corev1.PodConditionType{
	corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized, corev1.ContainersReady,
	corev1.PodReadyToStartContainers, corev1.PodResizePending, corev1.PodResizeInProgress,
}

// foreignConditions returns the conditions of conds the node does not own.
func foreignConditions(conds []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range conds {
		if !slices.Contains(nodeConditions, c.Type) {
			out = append(out, *c.DeepCopy())
		}
	}
	return out
}

// Why a pod is not Ready while its containers are, as the kubelet says it.
const readinessGatesNotReady = "ReadinessGatesNotReady"

// gatedReady is the kubelet's rule for the pod's Ready condition: Ready when the
// containers are ready (ContainersReady, given as containersReady with its reason)
// and every readiness gate's condition in conds is True. A pod that is not Ready
// says why, with the kubelet's reason and message.
func gatedReady(gates []corev1.PodReadinessGate, containersReady bool, reason string, conds []corev1.PodCondition) (bool, string, string) {
	if !containersReady {
		return false, reason, ""
	}
	var unready []string
	for _, g := range gates {
		i := slices.IndexFunc(conds, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		switch {
		case i < 0:
			unready = append(unready, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case conds[i].Status != corev1.ConditionTrue:
			unready = append(unready, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, conds[i].Status))
		}
	}
	if len(unready) > 0 {
		return false, readinessGatesNotReady, strings.Join(unready, ", ")
	}
	return true, "", ""
}

// mergeAPIStatus makes status, computed by the node, safe to write over the pod the
// API server has (api): the conditions someone else owns there are carried over
// instead of erased, and Ready is decided again with the readiness gates as they
// are there now.
func mergeAPIStatus(api *corev1.Pod, status *corev1.PodStatus) {
	var ours []corev1.PodCondition
	for _, c := range status.Conditions {
		if slices.Contains(nodeConditions, c.Type) {
			ours = append(ours, c)
		}
	}
	foreign := foreignConditions(api.Status.Conditions)
	ci := slices.IndexFunc(ours, func(c corev1.PodCondition) bool { return c.Type == corev1.ContainersReady })
	ri := slices.IndexFunc(ours, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	if ci >= 0 && ri >= 0 {
		cr := ours[ci]
		ready, reason, msg := gatedReady(api.Spec.ReadinessGates, cr.Status == corev1.ConditionTrue, cr.Reason, foreign)
		r := &ours[ri]
		if was := r.Status == corev1.ConditionTrue; was != ready {
			r.LastTransitionTime = metav1.Now()
		}
		r.Status, r.Reason, r.Message = corev1.ConditionFalse, reason, msg
		if ready {
			r.Status = corev1.ConditionTrue
		}
	}
	status.Conditions = append(ours, foreign...)
}

// PreserveForeignConditions wraps the client the node's pod controller writes pod
// status with. virtual-kubelet replaces the whole status with the node's; the
// kubelet instead keeps the conditions it does not own. Each status write here
// reads the pod first and keeps what others wrote (mergeAPIStatus), at the
// resourceVersion it read, so a condition set in between fails the write (a
// conflict, retried) instead of being lost.
func PreserveForeignConditions(c corev1client.PodsGetter) corev1client.PodsGetter {
	return preservingPods{c}
}

type preservingPods struct{ corev1client.PodsGetter }

func (p preservingPods) Pods(namespace string) corev1client.PodInterface {
	return preservingPodClient{p.PodsGetter.Pods(namespace)}
}

type preservingPodClient struct{ corev1client.PodInterface }

func (c preservingPodClient) UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	api, err := c.PodInterface.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if pod.UID != "" && api.UID != pod.UID {
		// A new pod of the same name: this status is not its own.
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, pod.Name,
			fmt.Errorf("pod UID %s, status is for %s", api.UID, pod.UID))
	}
	pod = pod.DeepCopy()
	pod.ResourceVersion = api.ResourceVersion
	mergeAPIStatus(api, &pod.Status)
	return c.PodInterface.UpdateStatus(ctx, pod, opts)
}

// WatchAPIPods has the runtime follow the node's pods as the API server has them:
// the conditions others own there (readiness gates) go into the pods' status, and
// a change of them makes the status, Ready included, go out again at once.
func (rt *Runtime) WatchAPIPods(pods corev1informers.PodInformer) error {
	rt.apiPods.Store(pods.Lister())
	_, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Pod)
			pod, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			if !conditionsEqual(foreignConditions(old.Status.Conditions), foreignConditions(pod.Status.Conditions)) {
				if p := rt.lookup(pod.Namespace, pod.Name); p != nil && p.pod.UID == pod.UID {
					p.changed()
				}
			}
		},
	})
	return err
}

// conditionsEqual compares conditions by what they say, not when.
func conditionsEqual(a, b []corev1.PodCondition) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.PodCondition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
	})
}

// apiConditionsLocked returns the conditions others own in the API server's copy of
// the pod, if the runtime follows it. The caller holds p.mu.
func (p *podState) apiConditionsLocked() []corev1.PodCondition {
	lister, ok := p.rt.apiPods.Load().(corev1listers.PodLister)
	if !ok {
		return nil
	}
	api, err := lister.Pods(p.pod.Namespace).Get(p.pod.Name)
	if err != nil || api.UID != p.pod.UID {
		return nil
	}
	return foreignConditions(api.Status.Conditions)
}
