package k8s_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
)

// The load balancer's warnings become Events on the Service, or on the
// pod of a HostPort service, naming its UID, as the tables hold them; an
// object the tables do not hold gets none.
func TestServiceEvents(t *testing.T) {
	pod := k8stest.Pod("ns", "p", func(p *corev1.Pod) {
		p.UID, p.Spec.NodeName = "u-pod", "node-a"
		p.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}}}
	})
	kube := kubefake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-web"}}, pod)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := statedb.New()
	tbls, err := tables.Start(ctx, db, &tables.Clients{Kube: kube, NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	events := lbk8s.NewServiceEvents(kube, db, tbls.Services, tbls.Pods, "node-a")
	events.Start(ctx)
	events.Warn(loadbalancer.ServiceName{Namespace: "ns", Name: "gone"}, loadbalancer.ReasonServiceRefused, "lost")
	events.Warn(loadbalancer.ServiceName{Namespace: "ns", Name: "web"}, loadbalancer.ReasonServiceRefused, "too large")
	events.Warn(loadbalancer.HostPortName("ns", "p"), loadbalancer.ReasonFrontendConflict, "taken")
	want := "Pod ns/p u-pod Warning FrontendConflict: taken\nService ns/web u-web Warning ServiceRefused: too large"
	testenv.Eventually(t, 30*time.Second, func() error {
		evs, err := kube.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, e := range evs.Items {
			o := e.InvolvedObject
			got = append(got, fmt.Sprintf("%s %s/%s %s %s %s: %s", o.Kind, o.Namespace, o.Name, o.UID, e.Type, e.Reason, e.Message))
		}
		slices.Sort(got)
		if strings.Join(got, "\n") != want {
			return fmt.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
		}
		return nil
	})
}
