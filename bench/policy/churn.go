package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/bench/internal/benchlab"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
	"github.com/cilium-go/cilium/pkg/policy/api"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// The churn part runs the agent's policy cells in this process (the
// engine, its tables and the reconciler, fed by the Kubernetes tables
// that reflectors fill from a fake clientset) into a node's real BPF
// maps, with 1,000 selectors and 100 or 10,000 identities, and adds
// identities one at a time: each matches one selector, which 4 local
// endpoints use. It measures the process's CPU time per add and each
// add's time from the create to its entry in the map.

const (
	churnSelectors = 1000
	churnTeams     = 100 // selectors are teams x namespaces
	churnEndpoints = 4
	localIdentity  = identity.MinClusterIdentity
	firstPeer      = localIdentity + 1
	entryWait      = 5 * time.Second
)

type churnResult struct {
	identities int
	adds       int
	cpuPerAdd  time.Duration
	latencies  []time.Duration // sorted
	lost       int
}

// peerIdentity is identity number n of team n%100 in namespace
// n/100%10: it matches exactly one selector.
func peerIdentity(n int) *v2.CiliumIdentity {
	return &v2.CiliumIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: identity.NumericIdentity(int(firstPeer) + n).String()},
		SecurityLabels: map[string]string{
			"k8s:io.kubernetes.pod.namespace": fmt.Sprintf("ns%d", n/churnTeams%(churnSelectors/churnTeams)),
			"k8s:team":                        fmt.Sprintf("t%d", n%churnTeams),
			"k8s:app":                         fmt.Sprintf("app%d", n),
		},
	}
}

// churnPolicy is selector j's CiliumClusterwideNetworkPolicy: the local
// endpoints admit team j%100 of namespace j/100 on TCP 80. It says it
// was accepted already, so that the agent writes no status (the fake
// clientset's watchers hold 100 events).
func churnPolicy(j int) *v2.CiliumClusterwideNetworkPolicy {
	return &v2.CiliumClusterwideNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", j)},
		Status: v2.CiliumNetworkPolicyStatus{Conditions: []v2.NetworkPolicyCondition{
			{Type: policyk8s.ConditionValid, Status: metav1.ConditionTrue, Reason: "Accepted"}}},
		Spec: &api.Rule{
			EndpointSelector: &api.EndpointSelector{MatchLabels: map[string]string{"role": "local"}},
			Ingress: []api.IngressRule{{
				IngressCommonRule: api.IngressCommonRule{FromEndpoints: []api.EndpointSelector{{MatchLabels: map[string]string{
					"team": fmt.Sprintf("t%d", j%churnTeams), "k8s:io.kubernetes.pod.namespace": fmt.Sprintf("ns%d", j/churnTeams),
				}}}},
				ToPorts: []api.PortRule{{Ports: []api.PortProtocol{{Port: "80", Protocol: api.ProtoTCP}}}},
			}},
		},
	}
}

func churn(ctx context.Context, log *slog.Logger, identities, adds int) (churnResult, error) {
	res := churnResult{identities: identities, adds: adds}
	c, err := dptest.New(dptest.Options{Mode: spec.Native, Nodes: 1, PodsPerNode: 1})
	if err != nil {
		return res, err
	}
	defer c.Close()
	maps := c.Nodes[0].DP.Maps()

	objs := []k8sruntime.Object{&v2.CiliumIdentity{ObjectMeta: metav1.ObjectMeta{Name: localIdentity.String()},
		SecurityLabels: map[string]string{"k8s:role": "local", "k8s:io.kubernetes.pod.namespace": "local"}}}
	for n := range identities - 1 {
		objs = append(objs, peerIdentity(n))
	}
	for j := range churnSelectors {
		objs = append(objs, churnPolicy(j))
	}
	clients := &agent.Clients{Kube: kubefake.NewClientset(), Cilium: client.NewFake(objs...)}

	var db *statedb.DB
	var eps statedb.RWTable[*endpoint.EndpointRow]
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell, tables.Cell, policyagent.Cell, policyagent.EngineCell,
		cell.Provide(endpoint.NewTable, statedb.RWTable[*endpoint.EndpointRow].ToTable,
			func() *agent.Clients { return clients },
			func() agent.Config { return agent.Config{EnableK8s: true, K8sNodeName: "node-a"} },
			func() *tables.Clients {
				return &tables.Clients{Kube: clients.Kube, Cilium: clients.Cilium, NodeName: "node-a"}
			},
			func() policyagent.MapSource { return func() policyagent.Map { return maps } }),
		cell.Invoke(func(d *statedb.DB, t statedb.RWTable[*endpoint.EndpointRow]) { db, eps = d, t }),
	)
	hlog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := h.Start(hlog, ctx); err != nil {
		return res, fmt.Errorf("start the policy cells: %w", err)
	}
	defer func() { _ = h.Stop(hlog, context.Background()) }()
	txn := db.WriteTxn(eps)
	for id := range uint16(churnEndpoints) {
		_, _, _ = eps.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: id + 1, Identity: localIdentity}})
	}
	txn.Commit()
	// Every existing peer is in every endpoint's map before the adds.
	for n := range identities - 1 {
		if err := awaitEntry(ctx, maps, identity.NumericIdentity(int(firstPeer)+n), time.Minute); err != nil {
			return res, fmt.Errorf("initial policy: %w", err)
		}
	}
	log.Info("churn: adding identities", "present", identities, "selectors", churnSelectors, "adds", adds)

	// The setup's garbage is not the adds' work.
	runtime.GC()
	before := cpuTime()
	for k := range adds {
		n := identities - 1 + k
		start := time.Now()
		if _, err := clients.Cilium.CiliumV2().CiliumIdentities().Create(ctx, peerIdentity(n), metav1.CreateOptions{}); err != nil {
			return res, err
		}
		if err := awaitEntry(ctx, maps, identity.NumericIdentity(int(firstPeer)+n), entryWait); err != nil {
			res.lost++
			continue
		}
		res.latencies = append(res.latencies, time.Since(start))
	}
	res.cpuPerAdd = (cpuTime() - before) / time.Duration(adds)
	slices.Sort(res.latencies)
	return res, nil
}

// awaitEntry waits until every local endpoint's map admits id on TCP 80.
func awaitEntry(ctx context.Context, m benchlab.Maps, id identity.NumericIdentity, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for ep := range uint16(churnEndpoints) {
		for !m.PolicyHas(ep+1, spec.Ingress, id, spec.ProtoTCP, 80) {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("identity %d not in endpoint %d's map after %s", id, ep+1, wait)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return nil
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
