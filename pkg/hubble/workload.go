package hubble

import (
	"regexp"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
	corev1 "k8s.io/api/core/v1"
)

// cronJobRun is the name a CronJob gives its Jobs: its own and the
// scheduled time in minutes since the epoch.
var cronJobRun = regexp.MustCompile(`^(.+)-\d{8,10}$`)

// podTemplateHash is the label a Deployment's ReplicaSet stamps on its
// pods, the suffix of the ReplicaSet's name.
const podTemplateHash = "pod-template-hash"

// workloadOf is the workload a pod belongs to, as Hubble names it in
// flows: the controller that made the pod, named after what made that
// controller where its name tells (a Deployment's ReplicaSet, a CronJob's
// Job). A pod nothing made (a bare pod, a static pod) has none.
func workloadOf(pod *corev1.Pod) (*flow.Workload, bool) {
	if pod == nil || pod.GenerateName == "" {
		return nil, false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		w := &flow.Workload{Kind: ref.Kind, Name: ref.Name}
		switch hash := pod.Labels[podTemplateHash]; {
		case ref.Kind == "ReplicaSet" && hash != "" && strings.HasSuffix(ref.Name, "-"+hash):
			w.Kind, w.Name = "Deployment", strings.TrimSuffix(ref.Name, "-"+hash)
		case ref.Kind == "Job":
			if m := cronJobRun.FindStringSubmatch(ref.Name); m != nil {
				w.Kind, w.Name = "CronJob", m[1]
			}
		}
		return w, true
	}
	return nil, false
}
