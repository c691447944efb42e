package tables

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/health"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
)

func meta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
}

// tablesIn is what a consumer is given: every table, read-only.
type tablesIn struct {
	cell.In

	DB               *statedb.DB
	Pods             statedb.Table[*corev1.Pod]
	Namespaces       statedb.Table[*corev1.Namespace]
	Nodes            statedb.Table[*corev1.Node]
	Services         statedb.Table[*corev1.Service]
	EndpointSlices   statedb.Table[*discoveryv1.EndpointSlice]
	NetworkPolicies  statedb.Table[*networkingv1.NetworkPolicy]
	CiliumNodes      statedb.Table[*v2.CiliumNode]
	CiliumEndpoints  statedb.Table[*v2.CiliumEndpoint]
	CiliumIdentities statedb.Table[*v2.CiliumIdentity]
	CNPs             statedb.Table[*v2.CiliumNetworkPolicy]
	CCNPs            statedb.Table[*v2.CiliumClusterwideNetworkPolicy]
	CIDRGroups       statedb.Table[*v2.CiliumCIDRGroup]
}

// startTables runs the tables' cell over fake clientsets holding objs,
// and returns the tables once every one of them is initialized.
func startTables(t *testing.T, kube *kubefake.Clientset, cilium *client.Fake) (*statedb.DB, tablesIn) {
	t.Helper()
	var out tablesIn
	h := health.NewHive(
		job.Cell, statedb.Cell, health.Cell,
		cell.Provide(func() *Clients { return &Clients{Kube: kube, Cilium: cilium, NodeName: "node1"} }),
		Cell,
		cell.Invoke(func(in tablesIn) { out = in }),
	)
	log := hivetest.Logger(t)
	if err := h.Start(log, t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })
	for _, tbl := range []statedb.TableMeta{out.Pods, out.Namespaces, out.Nodes, out.Services, out.EndpointSlices,
		out.NetworkPolicies, out.CiliumNodes, out.CiliumEndpoints, out.CiliumIdentities, out.CNPs, out.CCNPs, out.CIDRGroups} {
		_, initialized := tbl.Initialized(out.DB.ReadTxn())
		select {
		case <-initialized:
		case <-time.After(10 * time.Second):
			t.Fatalf("table %s not initialized", tbl.Name())
		}
	}
	return out.DB, out
}

// get reads the object named key from tbl, as of now.
func get[T Object](db *statedb.DB, tbl statedb.Table[T], key string) (T, bool) {
	o, _, ok := tbl.Get(db.ReadTxn(), NameIndex[T]().Query(key))
	return o, ok
}

// What the API server holds before the agent starts is in the tables once
// they are initialized, trimmed; what changes later follows, deletions too.
func TestReflectorsFillTables(t *testing.T) {
	kube := kubefake.NewClientset(
		&corev1.Pod{ObjectMeta: meta("default", "web"), Spec: corev1.PodSpec{NodeName: "node1"}},
		&corev1.Namespace{ObjectMeta: meta("", "default")},
		&corev1.Service{ObjectMeta: meta("default", "web")},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}},
	)
	cilium := client.NewFake(
		&v2.CiliumIdentity{ObjectMeta: meta("", "1000"), SecurityLabels: map[string]string{"k8s:app": "web"}},
		&v2.CiliumEndpoint{ObjectMeta: meta("default", "web"), Status: v2.EndpointStatus{
			Networking: &v2.EndpointNetworking{Addressing: v2.AddressPairList{{IPV4: "10.0.1.5"}}}}},
	)
	db, tbls := startTables(t, kube, cilium)

	pod, ok := get(db, tbls.Pods, "default/web")
	if !ok || pod.Spec.NodeName != "node1" || pod.ManagedFields != nil {
		t.Errorf("pod default/web: %v %+v, want it, with no managed fields", ok, pod)
	}
	if _, ok := get(db, tbls.Namespaces, "default"); !ok {
		t.Error("namespace default missing")
	}
	if id, ok := get(db, tbls.CiliumIdentities, "1000"); !ok || id.SecurityLabels["k8s:app"] != "web" {
		t.Errorf("identity 1000: %v %+v", ok, id)
	}
	if cep, _, ok := tbls.CiliumEndpoints.Get(db.ReadTxn(), EndpointIPIndex.Query(netip.MustParseAddr("10.0.1.5"))); !ok || cep.Name != "web" {
		t.Errorf("CiliumEndpoint by 10.0.1.5: %v %v", ok, cep)
	}
	if es, _, ok := tbls.EndpointSlices.Get(db.ReadTxn(), ServiceIndex.Query("default/web")); !ok || es.Name != "web-abc" {
		t.Errorf("EndpointSlice of default/web: %v %v", ok, es)
	}

	// Later changes, each waking the table's watch channel.
	ctx := t.Context()
	_, watch := tbls.Services.AllWatch(db.ReadTxn())
	if _, err := kube.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: meta("default", "db")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watch:
	case <-time.After(10 * time.Second):
		t.Fatal("a new Service did not wake the table")
	}
	if err := cilium.CiliumV2().CiliumIdentities().Delete(ctx, "1000", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cep := &v2.CiliumEndpoint{ObjectMeta: meta("default", "web"), Status: v2.EndpointStatus{
		Networking: &v2.EndpointNetworking{Addressing: v2.AddressPairList{{IPV4: "10.0.1.6"}}}}}
	cep.ResourceVersion = "2"
	if _, err := cilium.CiliumV2().CiliumEndpoints("default").Update(ctx, cep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if _, ok := get(db, tbls.Services, "default/db"); !ok {
			return fmt.Errorf("service default/db missing")
		}
		if _, ok := get(db, tbls.CiliumIdentities, "1000"); ok {
			return fmt.Errorf("identity 1000 still there after its deletion")
		}
		txn := db.ReadTxn()
		if _, _, ok := tbls.CiliumEndpoints.Get(txn, EndpointIPIndex.Query(netip.MustParseAddr("10.0.1.5"))); ok {
			return fmt.Errorf("CiliumEndpoint still found by its old address")
		}
		if _, _, ok := tbls.CiliumEndpoints.Get(txn, EndpointIPIndex.Query(netip.MustParseAddr("10.0.1.6"))); !ok {
			return fmt.Errorf("CiliumEndpoint not found by its new address")
		}
		return nil
	})
}

// Without Kubernetes the tables are there, empty and initialized, so that
// whoever waits for them does not wait forever.
func TestTablesWithoutKubernetes(t *testing.T) {
	var out tablesIn
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell, Cell, cell.Invoke(func(in tablesIn) { out = in }))
	log := hivetest.Logger(t)
	if err := h.Start(log, t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop(log, context.Background())
	txn := out.DB.ReadTxn()
	if ok, _ := out.Pods.Initialized(txn); !ok || out.Pods.NumObjects(txn) != 0 {
		t.Errorf("pods table: initialized %v with %d objects, want initialized and empty", ok, out.Pods.NumObjects(txn))
	}
}

// A relist replaces the table's contents in one transaction: what is gone
// is deleted, and an object whose resource version did not change is not
// rewritten, so that it wakes nobody. Only the first list initializes.
func TestStoreReplace(t *testing.T) {
	db := statedb.New()
	tbl, err := newTable[*corev1.Pod](db, PodsName)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(db, tbl, trim[*corev1.Pod])
	if ok, _ := tbl.Initialized(db.ReadTxn()); ok {
		t.Fatal("initialized before the first list")
	}
	a, b := &corev1.Pod{ObjectMeta: meta("ns", "a")}, &corev1.Pod{ObjectMeta: meta("ns", "b")}
	if err := st.Replace([]any{a, b}, "1"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := tbl.Initialized(db.ReadTxn()); !ok {
		t.Fatal("not initialized after the first list")
	}
	_, revA, _ := tbl.Get(db.ReadTxn(), NameIndex[*corev1.Pod]().Query("ns/a"))

	a2 := &corev1.Pod{ObjectMeta: meta("ns", "a")} // same resource version
	c := &corev1.Pod{ObjectMeta: meta("ns", "c")}
	if err := st.Replace([]any{a2, c}, "2"); err != nil {
		t.Fatal(err)
	}
	txn := db.ReadTxn()
	var names []string
	for p := range tbl.All(txn) {
		names = append(names, Key(p))
	}
	if fmt.Sprint(names) != "[ns/a ns/c]" {
		t.Errorf("after the relist: %v, want [ns/a ns/c]", names)
	}
	if _, rev, _ := tbl.Get(txn, NameIndex[*corev1.Pod]().Query("ns/a")); rev != revA {
		t.Errorf("unchanged ns/a rewritten: revision %d, was %d", rev, revA)
	}
	if err := st.Update(&corev1.Service{}); err == nil {
		t.Error("a Service went into the pods table")
	}
}
