package hubble

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWorkloadOf(t *testing.T) {
	yes, no := true, false
	pod := func(generated bool, labels map[string]string, refs ...metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels, OwnerReferences: refs}}
		if generated {
			p.GenerateName = "p-"
		}
		return p
	}
	owner := func(kind, name string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{Kind: kind, Name: name, Controller: controller}
	}
	hash := map[string]string{"pod-template-hash": "5d8c7b"}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		kind, want string
	}{
		{"a Deployment's pod", pod(true, hash, owner("ReplicaSet", "web-5d8c7b", &yes)), "Deployment", "web"},
		{"a ReplicaSet of its own", pod(true, nil, owner("ReplicaSet", "web-5d8c7b", &yes)), "ReplicaSet", "web-5d8c7b"},
		{"a hash that is not the suffix", pod(true, hash, owner("ReplicaSet", "web", &yes)), "ReplicaSet", "web"},
		{"a StatefulSet", pod(true, nil, owner("StatefulSet", "db", &yes)), "StatefulSet", "db"},
		{"a DaemonSet", pod(true, nil, owner("DaemonSet", "cilium", &yes)), "DaemonSet", "cilium"},
		{"a CronJob's Job", pod(true, nil, owner("Job", "backup-29412345", &yes)), "CronJob", "backup"},
		{"a Job of its own", pod(true, nil, owner("Job", "migrate", &yes)), "Job", "migrate"},
		{"the controller among owners", pod(true, nil, owner("ConfigMap", "x", &no), owner("StatefulSet", "db", &yes)), "StatefulSet", "db"},
		{"a bare pod", pod(false, nil), "", ""},
		{"owned, not generated", pod(false, nil, owner("StatefulSet", "db", &yes)), "", ""},
		{"no controller", pod(true, nil, owner("ReplicaSet", "x", nil)), "", ""},
	}
	for _, c := range cases {
		w, ok := workloadOf(c.pod)
		if ok != (c.kind != "") || ok && (w.GetKind() != c.kind || w.GetName() != c.want) {
			t.Errorf("%s: %v %v, want %s %s", c.name, w, ok, c.kind, c.want)
		}
	}
	if _, ok := workloadOf(nil); ok {
		t.Error("nil pod has a workload")
	}
}
