package podruntime

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func cond(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s}
}

func TestGatedReady(t *testing.T) {
	gates := []corev1.PodReadinessGate{{ConditionType: "a"}, {ConditionType: "b"}}
	for _, tc := range []struct {
		name            string
		containersReady bool
		conds           []corev1.PodCondition
		want            bool
		reason, msg     string
	}{
		{"containers not ready", false, []corev1.PodCondition{cond("a", "True"), cond("b", "True")}, false, "ContainersNotReady", ""},
		{"gates missing", true, nil, false, "ReadinessGatesNotReady",
			`corresponding condition of pod readiness gate "a" does not exist., corresponding condition of pod readiness gate "b" does not exist.`},
		{"one gate false", true, []corev1.PodCondition{cond("a", "True"), cond("b", "False")}, false, "ReadinessGatesNotReady",
			`the status of pod readiness gate "b" is not "True", but False`},
		{"all gates true", true, []corev1.PodCondition{cond("b", "True"), cond("a", "True"), cond("other", "False")}, true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason, msg := gatedReady(gates, tc.containersReady, "ContainersNotReady", tc.conds)
			if ok != tc.want || reason != tc.reason || msg != tc.msg {
				t.Errorf("got %v %q %q, want %v %q %q", ok, reason, msg, tc.want, tc.reason, tc.msg)
			}
		})
	}
	if ok, _, _ := gatedReady(nil, true, "", nil); !ok {
		t.Error("without gates, Ready is ContainersReady")
	}
}

// The node's status write keeps what others own in the API server and decides
// Ready with the gates as they are there.
func TestPreserveForeignConditions(t *testing.T) {
	api := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec:       corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			cond(corev1.PodReady, "False"), cond("example.com/gate", "True"), cond(corev1.DisruptionTarget, "True"),
		}},
	}
	client := fake.NewClientset(api)
	pods := PreserveForeignConditions(client.CoreV1()).Pods("default")

	// The node did not know the gate yet: its status has Ready false, no gate.
	mine := api.DeepCopy()
	mine.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		cond(corev1.PodReady, "False"), cond(corev1.ContainersReady, "True"), cond(corev1.PodScheduled, "True"),
	}}
	if _, err := pods.UpdateStatus(context.Background(), mine, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	want := map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodReady: "True", corev1.ContainersReady: "True", corev1.PodScheduled: "True",
		"example.com/gate": "True", corev1.DisruptionTarget: "True",
	}
	if len(got.Status.Conditions) != len(want) {
		t.Errorf("conditions %+v, want %v", got.Status.Conditions, want)
	}
	for _, c := range got.Status.Conditions {
		if want[c.Type] != c.Status {
			t.Errorf("condition %s is %s, want %s", c.Type, c.Status, want[c.Type])
		}
	}

	// A status for another pod of the same name is refused.
	other := mine.DeepCopy()
	other.UID = "u0"
	if _, err := pods.UpdateStatus(context.Background(), other, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "u0") {
		t.Errorf("status of a former pod: %v", err)
	}
}
