package agent_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/k8s/agent/agenttest"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
)

func entry(id identity.NumericIdentity, tunnel string) spec.IPCacheEntry {
	e := spec.IPCacheEntry{Identity: id}
	if tunnel != "" {
		e.TunnelEndpoint = netip.MustParseAddr(tunnel)
	}
	return e
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// The watchers' view feeds the ipcache: what another node publishes shows
// up as a remote entry behind that node.
func TestWatchersCluster(t *testing.T) {
	kubeObjs := []runtime.Object{k8stest.Node("a", "192.168.0.2", ""), k8stest.Node("b", "192.168.0.3", "10.0.2.0/24")}
	cl := agenttest.Start(t, "a", kubeObjs)
	c, w := cl.Clients, cl.Watchers
	ws := statedb.NewWatchSet()
	txn := cl.DB.ReadTxn()
	for _, in := range w.ClusterInputs() {
		ws.Add(in.Watch(txn))
	}
	if _, err := c.Cilium.CiliumV2().CiliumEndpoints("shop").Create(context.Background(),
		k8stest.CiliumEndpoint("shop", "db", "10.0.2.8", "192.168.0.3", 301), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := ws.Wait(ctx, 0); err != nil {
		t.Fatal("the cluster's inputs did not change for a new CiliumEndpoint")
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		e, ok := ipcache.DesiredIPCache(w.Cluster(cl.DB.ReadTxn(), nil))[pfx("10.0.2.8/32")]
		if !ok || e != entry(301, "192.168.0.3") {
			return fmt.Errorf("10.0.2.8 in the ipcache: %+v %v", e, ok)
		}
		return nil
	})
	got := ipcache.DesiredIPCache(w.Cluster(cl.DB.ReadTxn(), []endpoint.Endpoint{{IPv4: netip.MustParseAddr("10.0.1.5"), Identity: 300}}))
	if got[pfx("192.168.0.2/32")] != entry(1, "") || got[pfx("192.168.0.3/32")] != entry(6, "") ||
		got[pfx("10.0.1.5/32")] != entry(300, "") {
		t.Errorf("ipcache %v", got)
	}
}
