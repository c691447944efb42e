package podruntime

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/kubernetes/pkg/kubelet/envvars"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
)

// defaultPath is the PATH containers get when neither the image nor the pod sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// podFacts are the runtime values the downward API exposes beyond the pod object.
type podFacts struct {
	Hostname string
	NodeIP   netip.Addr
	PodIPs   []netip.Addr
	// NodeCPU and NodeMemory stand in for limits a container does not set, as the
	// kubelet uses node allocatable for them.
	NodeCPU    resource.Quantity
	NodeMemory resource.Quantity
}

// envSource fetches the objects env and volumes refer to.
type envSource struct {
	client kubernetes.Interface
}

func (s envSource) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s envSource) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// serviceEnv returns the Docker-link style variables of the services visible to the
// pod: those of its namespace when service links are on, and the master service
// "kubernetes" always, as the kubelet does.
func (s envSource) serviceEnv(ctx context.Context, pod *corev1.Pod) (map[string]string, error) {
	var svcs []*corev1.Service
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	if links {
		list, err := s.client.CoreV1().Services(pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list services: %w", err)
		}
		for i := range list.Items {
			svcs = append(svcs, &list.Items[i])
		}
	}
	if !links || pod.Namespace != metav1.NamespaceDefault {
		k, err := s.client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		switch {
		case err == nil:
			svcs = append(svcs, k)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("get kubernetes service: %w", err)
		}
	}
	out := map[string]string{}
	for _, e := range envvars.FromServices(svcs) {
		out[e.Name] = e.Value
	}
	return out, nil
}

// containerEnv computes a container's environment in the kubelet's order: envFrom,
// then env (with $(VAR) expansion against what came before and the service
// variables), then service variables not already set, then HOSTNAME and PATH.
func containerEnv(ctx context.Context, src envSource, pod *corev1.Pod, c *corev1.Container, facts podFacts) ([]corev1.EnvVar, error) {
	svcEnv, err := src.serviceEnv(ctx, pod)
	if err != nil {
		return nil, err
	}
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, src, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			set(from.Prefix+k, data[k])
		}
	}
	mapping := expansion.MappingFuncFor(vals, svcEnv)
	for i := range c.Env {
		e := &c.Env[i]
		if e.ValueFrom == nil {
			set(e.Name, expansion.Expand(e.Value, mapping))
			continue
		}
		v, ok, err := envValueFrom(ctx, src, pod, c, e, facts)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(svcEnv)) {
		if _, ok := vals[k]; !ok {
			set(k, svcEnv[k])
		}
	}
	if _, ok := vals["HOSTNAME"]; !ok {
		set("HOSTNAME", facts.Hostname)
	}
	if _, ok := vals["PATH"]; !ok {
		set("PATH", defaultPath)
	}
	out := make([]corev1.EnvVar, 0, len(order))
	for _, k := range order {
		out = append(out, corev1.EnvVar{Name: k, Value: vals[k]})
	}
	return out, nil
}

func envFromData(ctx context.Context, src envSource, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := src.configMap(ctx, ns, from.ConfigMapRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("configmap %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := src.secret(ctx, ns, from.SecretRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("secret %s: %w", from.SecretRef.Name, err)
		}
		out := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

// envValueFrom resolves one valueFrom; ok is false when an optional source is missing.
func envValueFrom(ctx context.Context, src envSource, pod *corev1.Pod, c *corev1.Container, e *corev1.EnvVar, facts podFacts) (string, bool, error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := podFieldValue(pod, vf.FieldRef.FieldPath, facts)
		return v, err == nil, err
	case vf.ResourceFieldRef != nil:
		v, err := resourceFieldValue(pod, c, vf.ResourceFieldRef, facts)
		return v, err == nil, err
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		cm, err := src.configMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %s: %w", ref.Name, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), true, nil
		}
		if isTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("configmap %s has no key %q", ref.Name, ref.Key)
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		s, err := src.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %s: %w", ref.Name, err)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if isTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("secret %s has no key %q", ref.Name, ref.Key)
	}
	return "", false, nil
}

// podFieldValue answers a downward API field path, including the status fields only
// the runtime knows (pod IPs, host IP).
func podFieldValue(pod *corev1.Pod, path string, facts podFacts) (string, error) {
	joinIPs := func(ips []netip.Addr) string {
		s := make([]string, len(ips))
		for i, ip := range ips {
			s[i] = ip.String()
		}
		return strings.Join(s, ",")
	}
	switch path {
	case "spec.nodeName", "spec.host":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "spec.restartPolicy":
		return string(pod.Spec.RestartPolicy), nil
	case "spec.schedulerName":
		return pod.Spec.SchedulerName, nil
	case "status.phase":
		return string(pod.Status.Phase), nil
	case "status.hostIP", "status.hostIPs":
		if !facts.NodeIP.IsValid() {
			return "", nil
		}
		return facts.NodeIP.String(), nil
	case "status.podIP":
		if len(facts.PodIPs) == 0 {
			return "", nil
		}
		return facts.PodIPs[0].String(), nil
	case "status.podIPs":
		return joinIPs(facts.PodIPs), nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, path)
}

// resourceFieldValue answers resourceFieldRef like the kubelet: the container's limit
// (or request) divided by the divisor, rounded up, with node capacity standing in
// for an unset limit.
func resourceFieldValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector, facts podFacts) (string, error) {
	target := c
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		target = nil
		for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				if list[i].Name == ref.ContainerName {
					target = &list[i]
				}
			}
		}
		if target == nil {
			return "", fmt.Errorf("container %q not found", ref.ContainerName)
		}
	}
	var q resource.Quantity
	var ok bool
	switch ref.Resource {
	case "limits.cpu":
		if q, ok = target.Resources.Limits[corev1.ResourceCPU]; !ok {
			q = facts.NodeCPU
		}
	case "requests.cpu":
		q = target.Resources.Requests[corev1.ResourceCPU]
	case "limits.memory":
		if q, ok = target.Resources.Limits[corev1.ResourceMemory]; !ok {
			q = facts.NodeMemory
		}
	case "requests.memory":
		q = target.Resources.Requests[corev1.ResourceMemory]
	case "limits.ephemeral-storage", "requests.ephemeral-storage":
		q = target.Resources.Limits[corev1.ResourceEphemeralStorage]
	default:
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	if strings.HasSuffix(ref.Resource, ".cpu") {
		// CPU is fractional: compare in millicores and round up, at least 1 for limits.
		v := (q.MilliValue() + div.MilliValue() - 1) / div.MilliValue()
		if v == 0 && strings.HasPrefix(ref.Resource, "limits") {
			v = 1
		}
		return strconv.FormatInt(v, 10), nil
	}
	return strconv.FormatInt((q.Value()+div.Value()-1)/div.Value(), 10), nil
}

func isTrue(b *bool) bool { return b != nil && *b }
