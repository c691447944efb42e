// Package agenttest runs the agent's Kubernetes watchers over fake
// clientsets, for the tests of the packages that read them.
package agenttest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/k8s/client"
)

// StartWatchers runs the watchers of node over fake clientsets holding
// kubeObjs and ciliumObjs, synced, until the test ends.
func StartWatchers(t testing.TB, node string, kubeObjs []runtime.Object, ciliumObjs ...runtime.Object) (*agent.Clients, *agent.Watchers) {
	t.Helper()
	c := &agent.Clients{Kube: kubefake.NewClientset(kubeObjs...), Cilium: client.NewFake(ciliumObjs...)}
	w := agent.NewWatchers(c, node, 0)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.Run(ctx)
	syncCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if err := w.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	return c, w
}
