package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	cm "github.com/cilium/cilium/api/v1/models"
	"github.com/cilium/hive/cell"
	"github.com/go-openapi/strfmt"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/paths"
	"github.com/cilium-go/cilium/pkg/unixsock"
)

type fakeIPCache []models.IPCacheEntry

func (f fakeIPCache) ListIPCache() ([]models.IPCacheEntry, error) { return f, nil }

type fakeServices []models.Service

func (f fakeServices) ListServices() []models.Service { return f }

type fakeNodes []models.Node

func (f fakeNodes) ListNodes() ([]models.Node, error) { return f, nil }

// agent is the real API handler on a unix socket, over endpoints and
// health the test sets.
type agent struct {
	socket string
	health *health.Registry
}

type agentOptions struct {
	nodes    server.NodeLister
	policy   server.PolicyExplainer
	k8s      bool
	degraded bool
}

func startAgent(t *testing.T, o agentOptions) *agent {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	alloc, _, err := ipam.New(netip.MustParsePrefix("10.0.1.0/24"), podlink.GatewayIPv4, filepath.Join(dir, "ipam.json"))
	if err != nil {
		t.Fatal(err)
	}
	eps := endpointtest.Start(t, endpointtest.NewDatapath(), endpoint.NewInitIdentityAllocator(), alloc, filepath.Join(dir, "endpoints"))
	for i, cid := range []string{"0123456789abcdef0123", "fedcba9876543210fedc"} {
		_, _, err := eps.Create(context.Background(), endpoint.Spec{ContainerID: cid, PodName: []string{"web", "db"}[i],
			PodNamespace: "prod", IPv4: netip.AddrFrom4([4]byte{10, 0, 1, byte(10 + i)}), MAC: "02:00:00:00:00:0" + string('1'+rune(i)),
			IfName: "eth0", HostIfName: "lxc" + cid[:8], HostIfindex: 20 + i, NetNSPath: "/run/netns/" + cid[:4]})
		if err != nil {
			t.Fatal(err)
		}
	}
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.Bool("enable-k8s", o.k8s, "")
	fs.String("kubeconfig", "", "")
	fs.String("routing-mode", "native", "")
	fs.Bool("enable-ipv4-masquerade", true, "")
	hr := health.NewRegistry()
	hr.Scope("datapath").OK("datapath started")
	if o.k8s {
		hr.Scope("k8s").OK("CiliumEndpoints published")
	}
	if o.degraded {
		hr.Scope("ipcache").Degraded("sync failed", errors.New("map full"))
	}
	a := &agent{socket: filepath.Join(dir, "cilium.sock"), health: hr}
	s, err := server.New(server.Params{Log: log, Lifecycle: &cell.DefaultLifecycle{}, Paths: paths.Config{SocketPath: a.socket},
		Flags: fs, Health: hr, IPAM: alloc, Endpoints: eps, Nodes: o.nodes, Policy: o.policy, Services: fakeServices{
			{Frontend: "10.96.0.10:53/UDP", Type: "ClusterIP", Service: "kube-system/dns", Port: "dns", Status: "Done",
				ExternalTrafficPolicy: "Cluster", InternalTrafficPolicy: "Cluster", SessionAffinityTimeout: 60,
				Backends: []models.ServiceBackend{{Address: "10.0.1.10:53", State: "active"}, {Address: "10.0.2.7:53", State: "draining"}}},
			{Frontend: "192.168.1.1:30080/TCP", Type: "NodePort", Service: "prod/web", Status: "Pending",
				ExternalTrafficPolicy: "Local", InternalTrafficPolicy: "Cluster",
				Backends:         []models.ServiceBackend{},
				InternalBackends: []models.ServiceBackend{{Address: "10.0.2.8:80", State: "active"}}},
		},
		IPCache: fakeIPCache{{Prefix: "10.0.2.7/32", Identity: 4242, TunnelEndpoint: "192.168.1.2"}}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := unixsock.Listen(a.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return a
}

// run runs cilium-dbg with args against the agent and returns its output.
func run(t *testing.T, socket string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCommand(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append(args, "--socket-path", socket))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// lines splits a table into rows of fields.
func lines(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out = append(out, strings.Fields(l))
	}
	return out
}

func TestTables(t *testing.T) {
	nodes := fakeNodes{{Name: "node1", IPv4: "192.168.1.1", PodCIDR: "10.0.1.0/24", Local: true},
		{Name: "node2", IPv4: "192.168.1.2"}}
	a := startAgent(t, agentOptions{nodes: nodes, k8s: true})
	for _, tc := range []struct {
		args []string
		want [][]string // rows of fields, exactly
	}{
		{[]string{"endpoint", "list"}, [][]string{
			{"ID", "IDENTITY", "IPV4", "POD", "CONTAINER", "HOST", "IF", "STATE"},
			{"1", "5", "10.0.1.10", "prod/web", "0123456789ab", "lxc01234567", "ready"},
			{"2", "5", "10.0.1.11", "prod/db", "fedcba987654", "lxcfedcba98", "ready"},
		}},
		// Cilium's columns: cilium-cli reads the CIDR and the source.
		{[]string{"node", "list"}, [][]string{
			{"Name", "IPv4", "Address", "Endpoint", "CIDR", "IPv6", "Address", "Endpoint", "CIDR", "Source"},
			{"default/node1", "192.168.1.1", "10.0.1.0/24", "local"},
			{"default/node2", "192.168.1.2", "custom-resource"},
		}},
		{[]string{"service", "list"}, [][]string{
			{"FRONTEND", "TYPE", "SERVICE", "BACKENDS", "AFFINITY", "TRAFFIC", "POLICY", "STATUS"},
			{"10.96.0.10:53/UDP", "ClusterIP", "kube-system/dns:dns", "10.0.1.10:53,", "10.0.2.7:53", "(draining)", "ClientIP", "60s",
				"ext=Cluster", "int=Cluster", "Done"},
			{"192.168.1.1:30080/TCP", "NodePort", "prod/web", "external:", "(none);", "internal:", "10.0.2.8:80", "-",
				"ext=Local", "int=Cluster", "Pending"},
		}},
		{[]string{"identity", "get", "5"}, [][]string{
			{"ID:", "5"}, {"Endpoints:", "2"}, {"Labels:", "reserved:init"},
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := run(t, a.socket, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := lines(out); !equalRows(got, tc.want) {
				t.Fatalf("got\n%s\nwant rows %q", out, tc.want)
			}
		})
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], " ") != strings.Join(b[i], " ") {
			return false
		}
	}
	return true
}

// decode runs args with -o json into v.
func decode(t *testing.T, socket string, v any, args ...string) {
	t.Helper()
	out, err := run(t, socket, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v: %q: %v", args, out, err)
	}
}

// ciliumDecode runs args with -o json and decodes the answer strictly
// into v, Cilium's model, and validates it as Cilium's client would
// (enums, required fields).
func ciliumDecode(t *testing.T, socket string, v any, args ...string) {
	t.Helper()
	decode(t, socket, v, args...)
	if st, ok := v.(*cm.StatusResponse); ok && st.KubeProxyReplacement != nil && st.KubeProxyReplacement.Features != nil {
		// Cilium's agent says "Disabled", outside its own enum, and
		// cilium-cli reads that: validate the rest.
		c := *st
		kpr, f, np := *c.KubeProxyReplacement, *c.KubeProxyReplacement.Features, *c.KubeProxyReplacement.Features.NodePort
		if np.Acceleration != "Disabled" {
			t.Fatalf("%v: node port acceleration %q, want Disabled", args, np.Acceleration)
		}
		np.Acceleration = ""
		f.NodePort, kpr.Features, c.KubeProxyReplacement = &np, &f, &kpr
		v = &c
	}
	if err := validate(v); err != nil {
		t.Fatalf("%v: Cilium's model does not validate: %v", args, err)
	}
}

// validate runs Cilium's generated validation on a model or a list of them.
func validate(v any) error {
	type validator interface{ Validate(strfmt.Registry) error }
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if m, ok := rv.Interface().(validator); ok {
			return m.Validate(strfmt.Default)
		}
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Slice {
		for i := range rv.Len() {
			if err := validate(rv.Index(i).Interface()); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	}
	return nil
}

func TestJSON(t *testing.T) {
	a := startAgent(t, agentOptions{nodes: fakeNodes{{Name: "node1", IPv4: "192.168.1.1", PodCIDR: "10.0.1.0/24", Local: true}}, k8s: true})

	var eps []*cm.Endpoint
	ciliumDecode(t, a.socket, &eps, "endpoint", "list")
	if len(eps) != 2 || eps[0].Status.Networking.Addressing[0].IPv4 != "10.0.1.10" ||
		eps[1].Status.ExternalIdentifiers.K8sPodName != "db" || eps[1].Status.Networking.InterfaceIndex != 21 ||
		*eps[0].Status.State != cm.EndpointStateReady || eps[0].Status.Identity.ID != 5 ||
		!slices.Equal(eps[0].Status.Identity.Labels, cm.Labels{"reserved:init"}) {
		t.Errorf("endpoint list: %+v", eps)
	}
	for _, arg := range []string{"2", "container-id:fedcba9876543210fedc", "fedcba9876543210fedc"} {
		var ep []*cm.Endpoint
		ciliumDecode(t, a.socket, &ep, "endpoint", "get", arg)
		if len(ep) != 1 || ep[0].ID != 2 || ep[0].Status.ExternalIdentifiers.ContainerID != "fedcba9876543210fedc" ||
			ep[0].Status.Networking.Addressing[0].IPv4 != "10.0.1.11" {
			t.Errorf("endpoint get %s: %+v", arg, ep)
		}
	}
	var ids []*cm.Identity
	ciliumDecode(t, a.socket, &ids, "identity", "list")
	if len(ids) != 10 || ids[0].ID != 1 || ids[0].Labels[0] != "reserved:host" || ids[4].ID != 5 {
		t.Errorf("identity list: %+v", ids)
	}
	ciliumDecode(t, a.socket, &ids, "identity", "get", "2")
	if len(ids) != 1 || ids[0].ID != 2 || !slices.Equal(ids[0].Labels, cm.Labels{"reserved:world"}) {
		t.Errorf("identity get: %+v", ids)
	}
	var nodes []*cm.NodeElement
	ciliumDecode(t, a.socket, &nodes, "node", "list")
	if len(nodes) != 1 || nodes[0].Name != "default/node1" || nodes[0].PrimaryAddress.IPv4.IP != "192.168.1.1" ||
		nodes[0].PrimaryAddress.IPv4.AllocRange != "10.0.1.0/24" || nodes[0].Source != "local" {
		t.Errorf("node list: %+v", nodes)
	}
	var svcs []*cm.Service
	ciliumDecode(t, a.socket, &svcs, "service", "list")
	if len(svcs) != 2 {
		t.Fatalf("service list: %+v", svcs)
	}
	dns, web := svcs[0], svcs[1]
	if fe := dns.Spec.FrontendAddress; fe.IP != "10.96.0.10" || fe.Port != 53 || fe.Protocol != "udp" ||
		len(dns.Spec.BackendAddresses) != 2 || *dns.Spec.BackendAddresses[1].IP != "10.0.2.7" ||
		dns.Spec.BackendAddresses[1].State != cm.BackendAddressStateTerminatingDashNotDashServing ||
		dns.Spec.Flags.Type != "ClusterIP" || dns.Spec.Flags.Namespace != "kube-system" || dns.Spec.Flags.Name != "dns" ||
		dns.Status.Realized == nil {
		t.Errorf("service list dns: %+v %+v", dns.Spec, dns.Status)
	}
	// Pending: not realized yet.
	if web.Spec.Flags.Type != "NodePort" || web.Spec.Flags.ExtTrafficPolicy != "Local" || web.Status.Realized != nil {
		t.Errorf("service list web: %+v %+v", web.Spec, web.Status)
	}
	var st cm.StatusResponse
	ciliumDecode(t, a.socket, &st, "status")
	if st.Cilium.State != cm.StatusStateOk || st.Kubernetes.State != cm.K8sStatusStateOk ||
		st.Kubernetes.Msg != "CiliumEndpoints published" || st.Routing.InterHostRoutingMode != cm.RoutingInterHostRoutingModeNative ||
		!st.Masquerading.Enabled || st.IdentityRange.MinIdentity != 256 || st.Ipam == nil || st.KubeProxyReplacement.Mode != "False" {
		t.Errorf("status: %+v", st)
	}
	// As cilium-cli asks for the version.
	if out, err := run(t, a.socket, "version", "-o", "jsonpath={$.Daemon.Version}"); err != nil || out != "1.20.2-cilium-go\n" {
		t.Errorf("version: %q %v", out, err)
	}
}

func TestStatusBrief(t *testing.T) {
	healthy := startAgent(t, agentOptions{k8s: true})
	if out, err := run(t, healthy.socket, "status", "--brief"); err != nil || out != "OK\n" {
		t.Errorf("healthy: %q %v", out, err)
	}
	degraded := startAgent(t, agentOptions{degraded: true})
	out, err := run(t, degraded.socket, "status", "--brief")
	if err == nil || out != "error in cilium: ipcache: sync failed: map full\n" {
		t.Errorf("degraded: %q %v", out, err)
	}
	var st cm.StatusResponse
	ciliumDecode(t, degraded.socket, &st, "status")
	if st.Cilium.State != cm.StatusStateWarning || !strings.Contains(st.Cilium.Msg, "ipcache: sync failed: map full") ||
		st.Kubernetes.State != cm.K8sStatusStateDisabled {
		t.Errorf("degraded status: %+v %+v", st.Cilium, st.Kubernetes)
	}
	gone := filepath.Join(t.TempDir(), "gone.sock")
	if _, err := run(t, gone, "status", "--brief"); err == nil || err.Error() != "cilium: daemon unreachable" {
		t.Errorf("unreachable: %v", err)
	}
}

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    agentOptions
		want []string
	}{
		{"healthy", agentOptions{k8s: true}, []string{"Health:      OK", "Kubernetes:  OK: CiliumEndpoints published",
			"Datapath:    routing native, masquerade true", "Endpoints:   2", "Identities:  10",
			"  datapath  OK", "datapath started"}},
		{"without kubernetes", agentOptions{}, []string{"Kubernetes:  Disabled"}},
		// A degraded agent answers 503; its health is still the status.
		{"degraded", agentOptions{degraded: true}, []string{"Health:      Degraded",
			"  ipcache   Degraded", "sync failed: map full", "Endpoints:   2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startAgent(t, tc.o)
			out, err := run(t, a.socket, "status")
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in\n%s", w, out)
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	a := startAgent(t, agentOptions{})
	gone := filepath.Join(t.TempDir(), "gone.sock")
	for _, tc := range []struct {
		socket string
		args   []string
		want   string
	}{
		{gone, []string{"status"}, "agent unreachable at " + gone},
		{gone, []string{"endpoint", "list"}, "agent unreachable at " + gone},
		{a.socket, []string{"status", "-o", "yaml"}, `--output "yaml": want table, json or jsonpath=TEMPLATE`},
		{a.socket, []string{"status", "-o", "jsonpath={.cilium"}, `--output "jsonpath={.cilium": jsonpath: unclosed action`},
		{a.socket, []string{"endpoint", "get", "99"}, "404: 99: endpoint not found"},
		{a.socket, []string{"endpoint", "get", "nosuch"}, "404: container-id:nosuch: endpoint not found"},
		{a.socket, []string{"endpoint", "get"}, "accepts 1 arg(s)"},
		{a.socket, []string{"identity", "get", "web"}, `identity "web": not a number`},
		{a.socket, []string{"identity", "get", "77777"}, "identity 77777: not reserved and not used"},
		{a.socket, []string{"node", "list"}, "501: nodes: the agent runs without Kubernetes"},
		{a.socket, []string{"bpf", "policy", "list", "x"}, `endpoint id "x": want a number`},
		{a.socket, []string{"bpf", "ipcache", "list", "--bpf-root", t.TempDir()}, "map not pinned (is the agent's datapath started"},
		{a.socket, []string{"monitor", "--type", "flow"}, `--type "flow": want drop, trace or policy-verdict`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := run(t, tc.socket, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if out != "" {
				t.Fatalf("output on error: %q", out)
			}
		})
	}
}
