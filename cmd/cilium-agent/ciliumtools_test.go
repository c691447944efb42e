package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cm "github.com/cilium/cilium/api/v1/models"
	"github.com/go-openapi/strfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	k8sclient "github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/policy/api"
	"github.com/cilium-go/cilium/pkg/runtimeconfig"
)

// buildDbg builds the real cilium-dbg for the test.
func buildDbg(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cilium-dbg")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/cilium-go/cilium/cmd/cilium-dbg").CombinedOutput()
	if err != nil {
		t.Fatalf("build cilium-dbg: %v\n%s", err, out)
	}
	return bin
}

// dbgRunner runs the real cilium-dbg against the agent's socket.
type dbgRunner struct {
	bin, socket string
}

func (d dbgRunner) run(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, d.bin, append(args, "--socket-path", d.socket)...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// decode runs args and decodes stdout strictly into v, one of Cilium's
// models or a list of them, as cilium-cli decodes it.
func (d dbgRunner) decode(v any, args ...string) error {
	out, stderr, err := d.run(args...)
	if err != nil {
		return fmt.Errorf("cilium-dbg %v: %w: %s", args, err, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("cilium-dbg %v: decode %q: %w", args, out, err)
	}
	return nil
}

// The real cilium-dbg against a real agent (its cells, Kubernetes fakes,
// the datapath in memory): each command that cilium-cli runs in the agent
// pod answers in Cilium's models, and they say what the agent holds.
func TestCiliumToolsReadTheAgent(t *testing.T) {
	dbg := dbgRunner{bin: buildDbg(t)}
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web",
			Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{NodeName: "a", ServiceAccountName: "default"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.2"}}}},
	)
	cilium := k8sclient.NewFake()
	dir := t.TempDir()
	c := startOnFakes(t, &k8sagent.Clients{Kube: kube, Cilium: cilium}, endpointtest.NewDatapath(), dir,
		baseArgs(dir))
	dbg.socket = filepath.Join(dir, "run", "cilium.sock")
	ctx := context.Background()
	alloc, err := c.AllocateIP(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := c.PutEndpoint(ctx, models.EndpointRequest{ContainerID: "c1", PodName: "web", PodNamespace: "shop",
		IPv4: alloc.Address, MAC: "02:00:00:00:00:01", IfName: "eth0", HostIfName: "lxc1", HostIfindex: 5,
		NetNSPath: "/proc/1/ns/net"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("runtime config", func(t *testing.T) {
		// What cilium-cli's connectivity test reads (cat in the agent pod).
		b, err := os.ReadFile(filepath.Join(dir, "run", "state", "agent-runtime-config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			MonitorAggregation                                    string
			EnableICMPRules, EnableHealthChecking                 bool
			EnableEndpointHealthChecking, EncryptNode             bool
			EnableK8sNetworkPolicy, EnableK8sClusterNetworkPolicy bool
			RoutingMode                                           string
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		// The monitor and the datapath (--monitor-aggregation,
		// --routing-mode) are not among this agent's cells: the runtime
		// config tells no mode of theirs then.
		if cfg.MonitorAggregation != "" || !cfg.EnableICMPRules || !cfg.EnableHealthChecking || !cfg.EnableEndpointHealthChecking || cfg.EncryptNode ||
			!cfg.EnableK8sNetworkPolicy || cfg.EnableK8sClusterNetworkPolicy || cfg.RoutingMode != "" {
			t.Errorf("runtime config %s", b)
		}
		if runtimeconfig.Path(dbg.socket) != filepath.Join(dir, "run", "state", runtimeconfig.FileName) {
			t.Errorf("path %s", runtimeconfig.Path(dbg.socket))
		}
	})

	t.Run("status", func(t *testing.T) {
		testenv.Eventually(t, 30*time.Second, func() error {
			var st cm.StatusResponse
			if err := dbg.decode(&st, "status", "-o", "json"); err != nil {
				return err
			}
			if st.Kubernetes.State != cm.K8sStatusStateOk || st.Cilium.State != cm.StatusStateOk {
				return fmt.Errorf("kubernetes %+v, cilium %+v", st.Kubernetes, st.Cilium)
			}
			if st.Cluster.Self != "default/a" || st.Routing.InterHostRoutingMode != cm.RoutingInterHostRoutingModeNative ||
				st.Ipam.Allocations[alloc.Address] != "c1" || st.Proxy != nil || st.Encryption.Mode != "Disabled" {
				return fmt.Errorf("status %+v", st)
			}
			return nil
		})
		if out, stderr, err := dbg.run("status", "--brief"); err != nil || out != "OK\n" {
			t.Errorf("status --brief: %q %v %s", out, err, stderr)
		}
	})

	var labels cm.Labels
	t.Run("endpoints and identities", func(t *testing.T) {
		var eps []*cm.Endpoint
		if err := dbg.decode(&eps, "endpoint", "list", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		if len(eps) != 1 || eps[0].ID != int64(ep.ID) || eps[0].Status.Identity.ID != int64(ep.Identity) ||
			eps[0].Status.ExternalIdentifiers.K8sPodName != "web" || eps[0].Status.Networking.Addressing[0].IPv4 != alloc.Address {
			t.Fatalf("endpoint list %+v, want endpoint %d of identity %d", eps, ep.ID, ep.Identity)
		}
		labels = eps[0].Status.Identity.Labels
		if !slices.Contains(labels, "k8s:app=web") || !slices.Contains(labels, "k8s:io.kubernetes.pod.namespace=shop") {
			t.Errorf("labels %v", labels)
		}
		if err := eps[0].Validate(strfmt.Default); err != nil {
			t.Errorf("endpoint does not validate: %v", err)
		}
		var got []*cm.Endpoint
		if err := dbg.decode(&got, "endpoint", "get", strconv.Itoa(int(ep.ID)), "-o", "json"); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != int64(ep.ID) || got[0].Status.Policy == nil {
			t.Errorf("endpoint get %+v", got)
		}
		var ids []*cm.Identity
		if err := dbg.decode(&ids, "identity", "get", strconv.Itoa(int(ep.Identity)), "-o", "json"); err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || ids[0].ID != int64(ep.Identity) || !slices.Equal(ids[0].Labels, labels) {
			t.Errorf("identity get %+v, want labels %v", ids, labels)
		}
		if err := dbg.decode(&ids, "identity", "list", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(ids, func(id *cm.Identity) bool { return id.ID == int64(ep.Identity) }) {
			t.Errorf("identity list %+v misses %d", ids, ep.Identity)
		}
	})

	t.Run("policy revision", func(t *testing.T) {
		// As cilium-cli: the revision before a policy, then wait for every
		// endpoint with an identity to realize the revision after it.
		rev0 := policyRevision(t, dbg)
		rule := &api.Rule{EndpointSelector: &api.EndpointSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []api.IngressRule{{}}}
		cnp := &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "isolate"}, Spec: rule}
		if _, err := cilium.CiliumV2().CiliumNetworkPolicies("shop").Create(ctx, cnp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var rev int64
		testenv.Eventually(t, 30*time.Second, func() error {
			// Each change of the policy counts (its status too).
			if rev = policyRevision(t, dbg); rev < rev0+1 {
				return fmt.Errorf("policy revision %d, want at least %d", rev, rev0+1)
			}
			var eps []*cm.Endpoint
			if err := dbg.decode(&eps, "endpoint", "list", "-o", "json"); err != nil {
				return err
			}
			for _, e := range eps {
				p := e.Status.Policy
				if p == nil || p.Realized == nil || p.Realized.PolicyRevision < rev {
					return fmt.Errorf("endpoint %d has not realized revision %d: %+v", e.ID, rev, p)
				}
				if p.Realized.PolicyEnabled != cm.EndpointPolicyEnabledIngress {
					return fmt.Errorf("endpoint %d enforces %s, want ingress", e.ID, p.Realized.PolicyEnabled)
				}
			}
			return nil
		})
		var pol cm.Policy
		if err := dbg.decode(&pol, "policy", "get", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		if pol.Revision < rev || !strings.Contains(pol.Policy, `"name":"isolate"`) {
			t.Errorf("policy get %+v", pol)
		}
	})

	t.Run("nodes", func(t *testing.T) {
		var nodes []*cm.NodeElement
		if err := dbg.decode(&nodes, "node", "list", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 1 || nodes[0].Name != "default/a" || nodes[0].Source != "local" ||
			nodes[0].PrimaryAddress.IPv4.IP != "192.168.0.2" {
			t.Errorf("node list %+v", nodes)
		}
		// cilium-cli parses the table: the header, then the source last.
		out, _, err := dbg.run("node", "list")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(out))
		var rows [][]string
		for sc.Scan() {
			rows = append(rows, strings.Fields(sc.Text()))
		}
		if len(rows) != 2 || rows[1][0] != "default/a" || rows[1][len(rows[1])-1] != "local" {
			t.Errorf("node list table %q", out)
		}
	})

	t.Run("services and metrics", func(t *testing.T) {
		var svcs []*cm.Service
		if err := dbg.decode(&svcs, "service", "list", "--output=json"); err != nil {
			t.Fatal(err)
		}
		var ms []*cm.Metric
		if err := dbg.decode(&ms, "metrics", "list", "-p", "cilium_agent_api.*", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 || !slices.ContainsFunc(ms, func(m *cm.Metric) bool {
			return m.Name == "cilium_agent_api_process_time_seconds" && m.Labels["path"] == "/v1/endpoint" && m.Value > 0
		}) {
			t.Errorf("metrics %+v: want the API's request times", ms)
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.Name, "cilium_agent_api") {
				t.Errorf("metric %s does not match the pattern", m.Name)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"endpoint", "get", "999", "-o", "json"}, "999: endpoint not found"},
			{[]string{"identity", "get", "web"}, `identity "web": not a number`},
			{[]string{"identity", "get", "70000"}, "identity 70000: not reserved and not used"},
			{[]string{"metrics", "list", "-p", "("}, `--match-pattern "("`},
			{[]string{"status", "-o", "yaml"}, `--output "yaml"`},
		} {
			out, stderr, err := dbg.run(tc.args...)
			if err == nil || !strings.Contains(stderr, tc.want) || out != "" {
				t.Errorf("cilium-dbg %v: %v, stdout %q, stderr %q: want a failure naming %q", tc.args, err, out, stderr, tc.want)
			}
		}
	})
}

// policyRevision asks as cilium-cli does, and reads the answer as it does.
func policyRevision(t *testing.T, dbg dbgRunner) int64 {
	t.Helper()
	out, stderr, err := dbg.run("policy", "get", "-o", "jsonpath='{.revision}'")
	if err != nil {
		t.Fatalf("policy get: %v: %s", err, stderr)
	}
	rev, err := strconv.ParseInt(strings.Trim(out, "'\n"), 10, 64)
	if err != nil {
		t.Fatalf("revision %q: %v", out, err)
	}
	return rev
}

// A policy refused for an endpoint (its map would not hold it) is not
// realized there: the endpoint's policy revision stays below the agent's,
// so that cilium-cli, waiting for it, reports the policy not applied,
// until the policy fits again.
func TestCiliumToolsSeeARefusedPolicy(t *testing.T) {
	dbg := dbgRunner{bin: buildDbg(t)}
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web",
			Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{NodeName: "a", ServiceAccountName: "default"}},
	)
	cilium := k8sclient.NewFake()
	dir := t.TempDir()
	c := startOnFakes(t, &k8sagent.Clients{Kube: kube, Cilium: cilium}, endpointtest.NewDatapath(), dir,
		append(baseArgs(dir), "--bpf-policy-map-max=256"))
	dbg.socket = filepath.Join(dir, "run", "cilium.sock")
	ctx := context.Background()
	alloc, err := c.AllocateIP(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutEndpoint(ctx, models.EndpointRequest{ContainerID: "c1", PodName: "web", PodNamespace: "shop",
		IPv4: alloc.Address, MAC: "02:00:00:00:00:01", IfName: "eth0", HostIfName: "lxc1", HostIfindex: 5,
		NetNSPath: "/proc/1/ns/net"}); err != nil {
		t.Fatal(err)
	}
	realized := func() (int64, error) {
		var eps []*cm.Endpoint
		if err := dbg.decode(&eps, "endpoint", "list", "-o", "json"); err != nil {
			return 0, err
		}
		if len(eps) != 1 || eps[0].Status.Policy == nil {
			return 0, fmt.Errorf("endpoints %+v", eps)
		}
		return eps[0].Status.Policy.Realized.PolicyRevision, nil
	}
	rev0 := policyRevision(t, dbg)
	testenv.Eventually(t, 30*time.Second, func() error {
		if r, err := realized(); err != nil || r != rev0 {
			return fmt.Errorf("realized %d %v, want %d", r, err, rev0) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})

	// 300 ports: more entries than the endpoint's map holds.
	var ports []api.PortProtocol
	for p := 1000; p < 1300; p++ {
		ports = append(ports, api.PortProtocol{Port: strconv.Itoa(p), Protocol: "TCP"})
	}
	rule := &api.Rule{EndpointSelector: &api.EndpointSelector{MatchLabels: map[string]string{"app": "web"}},
		Ingress: []api.IngressRule{{ToPorts: []api.PortRule{{Ports: ports}}}}}
	large := &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "large"}, Spec: rule}
	cnps := cilium.CiliumV2().CiliumNetworkPolicies("shop")
	if _, err := cnps.Create(ctx, large, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		ep, err := c.GetEndpointByID(ctx, 1)
		if err != nil || ep.Policy == nil || ep.Policy.Refused == "" {
			return fmt.Errorf("endpoint policy %+v %v, want refused", ep.Policy, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		if rev := policyRevision(t, dbg); rev <= rev0 {
			return fmt.Errorf("policy revision %d, want above %d", rev, rev0)
		}
		if r, err := realized(); err != nil || r != 0 {
			return fmt.Errorf("realized %d %v, want 0 while refused", r, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})

	// Gone, the policy before is whole again, and realized.
	if err := cnps.Delete(ctx, "large", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		rev := policyRevision(t, dbg)
		if r, err := realized(); err != nil || r < rev {
			return fmt.Errorf("realized %d %v, want %d", r, err, rev) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
}

// A policy refused whole (here for Kafka rules, which the agent does not
// enforce) changes nothing in the agent's repository, so, as in Cilium,
// whose agent imports nothing of a policy it cannot parse, it does not
// count as a policy revision and holds no endpoint back: the endpoints
// stay at the revision the agent reports, and reach the next one, of a
// policy accepted beside it. Deleting it counts, as every removal does in
// Cilium, and is realized at once.
func TestCiliumToolsRefusedPolicyHoldsNoEndpointBack(t *testing.T) {
	dbg := dbgRunner{bin: buildDbg(t)}
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web",
			Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{NodeName: "a", ServiceAccountName: "default"}},
	)
	cilium := k8sclient.NewFake()
	dir := t.TempDir()
	c := startOnFakes(t, &k8sagent.Clients{Kube: kube, Cilium: cilium}, endpointtest.NewDatapath(), dir, baseArgs(dir))
	dbg.socket = filepath.Join(dir, "run", "cilium.sock")
	ctx := context.Background()
	alloc, err := c.AllocateIP(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutEndpoint(ctx, models.EndpointRequest{ContainerID: "c1", PodName: "web", PodNamespace: "shop",
		IPv4: alloc.Address, MAC: "02:00:00:00:00:01", IfName: "eth0", HostIfName: "lxc1", HostIfindex: 5,
		NetNSPath: "/proc/1/ns/net"}); err != nil {
		t.Fatal(err)
	}
	// realizedAt waits until the agent reports revision want and the
	// endpoint realized it, as cilium-cli waits.
	realizedAt := func(want int64) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, func() error {
			if rev := policyRevision(t, dbg); rev != want {
				return fmt.Errorf("policy revision %d, want %d", rev, want)
			}
			var eps []*cm.Endpoint
			if err := dbg.decode(&eps, "endpoint", "list", "-o", "json"); err != nil {
				return err
			}
			if len(eps) != 1 || eps[0].Status.Policy == nil || eps[0].Status.Policy.Realized == nil {
				return fmt.Errorf("endpoints %+v", eps)
			}
			if r := eps[0].Status.Policy.Realized.PolicyRevision; r != want {
				return fmt.Errorf("endpoint realized %d, want %d", r, want)
			}
			return nil
		})
	}
	web := &api.EndpointSelector{MatchLabels: map[string]string{"app": "web"}}
	rev0 := policyRevision(t, dbg)
	realizedAt(rev0)

	cnps := cilium.CiliumV2().CiliumNetworkPolicies("shop")
	// Generation 1, as the API server sets it: the agent's status writes
	// (a subresource) keep it, so they are no change of the policy.
	refused := &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kafka", Generation: 1},
		Spec: &api.Rule{EndpointSelector: web, Egress: []api.EgressRule{{ToPorts: []api.PortRule{{
			Ports: []api.PortProtocol{{Port: "9092", Protocol: api.ProtoTCP}},
			Rules: &api.L7Rules{Kafka: []json.RawMessage{json.RawMessage(`{"topic":"orders"}`)}}}}}}}}
	if _, err := cnps.Create(ctx, refused, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		p, err := cnps.Get(ctx, "kafka", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == "Valid" && cond.Status == metav1.ConditionFalse {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v, want Valid False", p.Status.Conditions)
	})
	realizedAt(rev0)

	accepted := &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "allow-all-ingress", Generation: 1},
		Spec: &api.Rule{EndpointSelector: web, Ingress: []api.IngressRule{{IngressCommonRule: api.IngressCommonRule{
			FromEntities: []api.Entity{api.EntityAll}}}}}}
	if _, err := cnps.Create(ctx, accepted, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	realizedAt(rev0 + 1)

	for i, name := range []string{"kafka", "allow-all-ingress"} {
		if err := cnps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		realizedAt(rev0 + 2 + int64(i))
	}
}
