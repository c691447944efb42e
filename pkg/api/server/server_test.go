package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cm "github.com/cilium/cilium/api/v1/models"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipam"
)

// podDevices stands in for the kernel: the names in pods, with their
// index, are pod devices; everything else is refused as the datapath
// would refuse it.
type podDevices map[string]int

func (d podDevices) CheckPodDevice(name string, ifindex int) error {
	if idx, ok := d[name]; !ok || idx != ifindex {
		return fmt.Errorf("%s: %w", name, podlink.ErrNotPodDevice)
	}
	return nil
}

type fixture struct {
	s     *Server
	h     http.Handler
	ipam  *ipam.Allocator
	eps   *endpoint.Manager
	level *slog.LevelVar
	hr    *health.Registry
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	a, _, err := ipam.New(netip.MustParsePrefix("10.0.1.0/24"), podlink.GatewayIPv4, filepath.Join(dir, "ipam.json"))
	if err != nil {
		t.Fatal(err)
	}
	eps := endpointtest.Start(t, endpointtest.NewDatapath(), endpoint.NewInitIdentityAllocator(), a, filepath.Join(dir, "endpoints"))
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.String("ipam-pod-cidr", "10.0.1.0/24", "")
	f := &fixture{ipam: a, eps: eps, level: new(slog.LevelVar), hr: health.NewRegistry()}
	devices := podDevices{"lxcabc": 7, "lxcother": 7}
	f.s = &Server{p: Params{Log: log, Flags: fs, Health: f.hr, IPAM: a, Endpoints: eps, LogLevel: f.level, PodDevices: devices}}
	f.h = f.s.Handler()
	return f
}

func (f *fixture) do(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: answer %q: %v", method, path, rec.Body.String(), err)
		}
	}
	return rec.Code
}

func endpointBody(cid, ip string) string {
	b, _ := json.Marshal(models.EndpointRequest{ContainerID: cid, PodName: "web", PodNamespace: "prod", IPv4: ip,
		MAC: "02:00:00:00:00:01", IfName: "eth0", HostIfName: "lxc" + cid, HostIfindex: 7, NetNSPath: "/run/netns/p"})
	return string(b)
}

func TestEndpointLifecycle(t *testing.T) {
	f := newFixture(t)
	var alloc models.IPAMResponse
	if code := f.do(t, "POST", "/v1/ipam", `{"owner":"abc"}`, &alloc); code != http.StatusCreated {
		t.Fatalf("POST /v1/ipam: %d", code)
	}
	if alloc.Address != "10.0.1.1" || alloc.Gateway != "169.254.1.1" || alloc.PodCIDR != "10.0.1.0/24" {
		t.Fatalf("allocation %+v", alloc)
	}
	var ep models.Endpoint
	if code := f.do(t, "PUT", "/v1/endpoint/container-id:abc", endpointBody("abc", alloc.Address), &ep); code != http.StatusCreated {
		t.Fatalf("PUT: %d", code)
	}
	if ep.ID != 1 || ep.Identity != identity.Init || ep.IPv4 != alloc.Address || ep.State != "ready" {
		t.Fatalf("endpoint %+v", ep)
	}
	if code := f.do(t, "PUT", "/v1/endpoint/container-id:abc", endpointBody("abc", alloc.Address), &ep); code != http.StatusOK {
		t.Fatalf("PUT again: %d, want 200", code)
	}
	var list []models.Endpoint
	if code := f.do(t, "GET", "/v1/endpoint", "", &list); code != 200 || len(list) != 1 {
		t.Fatalf("GET /v1/endpoint: %d %+v", code, list)
	}
	var ids []models.Identity
	f.do(t, "GET", "/v1/identity", "", &ids)
	if len(ids) != 10 || ids[4].ID != 5 || ids[4].Endpoints != 1 || ids[4].Labels[0] != "reserved:init" {
		t.Fatalf("identities %+v", ids)
	}
	// Cilium's GET /v1/identity/{id}, in Cilium's model.
	var one cm.Identity
	if code := f.do(t, "GET", "/v1/identity/5", "", &one); code != 200 || one.ID != 5 || !slices.Equal(one.Labels, cm.Labels{"reserved:init"}) {
		t.Fatalf("GET /v1/identity/5: %d %+v", code, one)
	}
	for path, want := range map[string]int{"/v1/identity/4242": http.StatusNotFound, "/v1/identity/web": http.StatusBadRequest} {
		var e models.Error
		if code := f.do(t, "GET", path, "", &e); code != want || !strings.Contains(e.Message, "identity ") {
			t.Fatalf("GET %s: %d %+v, want %d", path, code, e, want)
		}
	}
	if code := f.do(t, "DELETE", "/v1/endpoint/container-id:abc", "", &ep); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}
	var e models.Error
	if code := f.do(t, "DELETE", "/v1/endpoint/container-id:abc", "", &e); code != http.StatusNotFound || e.Code != 404 {
		t.Fatalf("DELETE again: %d %+v", code, e)
	}
	if got := f.ipam.List(); len(got) != 0 {
		t.Fatalf("address not released with the endpoint: %v", got)
	}
}

func TestIPAMRelease(t *testing.T) {
	f := newFixture(t)
	var a, b models.IPAMResponse
	f.do(t, "POST", "/v1/ipam", `{"owner":"x"}`, &a)
	if code := f.do(t, "DELETE", "/v1/ipam/"+a.Address, "", nil); code != http.StatusOK {
		t.Fatalf("DELETE /v1/ipam/%s: %d", a.Address, code)
	}
	if len(f.ipam.List()) != 0 {
		t.Fatalf("still allocated: %v", f.ipam.List())
	}
	f.do(t, "POST", "/v1/ipam", `{"owner":"y"}`, &b)
	if b.Address == "" || b.Address == a.Address {
		t.Fatalf("next allocation %+v reuses %s at once", b, a.Address)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/v1/ipam", `{}`, 400, "owner: required"},
		{"POST", "/v1/ipam", `{"owner": 5}`, 400, "owner: want string"},
		{"POST", "/v1/ipam", `{"owner":"a","extra":1}`, 400, `unknown field "extra"`},
		{"POST", "/v1/ipam", `{"owner":"a"} {}`, 400, "data after the JSON object"},
		{"DELETE", "/v1/ipam/nonsense", ``, 400, "ip: "},
		{"DELETE", "/v1/ipam/10.0.1.9", ``, 404, "not allocated"},
		{"PUT", "/v1/endpoint/abc", endpointBody("abc", "10.0.1.1"), 400, "id: "},
		{"PUT", "/v1/endpoint/container-id:xyz", endpointBody("abc", "10.0.1.1"), 400, "containerID: "},
		{"PUT", "/v1/endpoint/container-id:abc", endpointBody("abc", "300.1.1.1"), 400, "ipv4: "},
		{"PUT", "/v1/endpoint/container-id:abc", strings.Replace(endpointBody("abc", "10.0.1.1"), `"hostIfindex":7`, `"hostIfindex":0`, 1), 400, "hostIfindex: "},
		{"PUT", "/v1/endpoint/container-id:abc", strings.Replace(endpointBody("abc", "10.0.1.1"), `"hostIfindex":7`, `"hostIfindex":"7"`, 1), 400, "hostIfindex: want int"},
		{"GET", "/v1/endpoint/container-id:none", ``, 404, "not found"},
		{"PATCH", "/v1/config", `{"options":{"color":"true"}}`, 400, "options.color: unknown option"},
		{"PATCH", "/v1/config", `{"options":{"debug":"maybe"}}`, 400, "options.debug: "},
		{"PATCH", "/v1/config", `{}`, 400, "options: required"},
		{"GET", "/v1/nothing", ``, 404, "no operation"},
	} {
		var e models.Error
		code := f.do(t, tc.method, tc.path, tc.body, &e)
		if code != tc.code || e.Code != tc.code || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s %s %s: %d %+v, want %d with %q", tc.method, tc.path, tc.body, code, e, tc.code, tc.want)
		}
	}
}

func TestConfigPatchDebug(t *testing.T) {
	f := newFixture(t)
	var c models.Config
	f.do(t, "GET", "/v1/config", "", &c)
	if c.Flags["ipam-pod-cidr"] != "10.0.1.0/24" || c.Options["debug"] != "false" {
		t.Fatalf("config %+v", c)
	}
	if code := f.do(t, "PATCH", "/v1/config", `{"options":{"debug":"true"}}`, &c); code != 200 || c.Options["debug"] != "true" {
		t.Fatalf("PATCH: %d %+v", code, c)
	}
	if f.level.Level() != slog.LevelDebug {
		t.Fatalf("log level %v after debug=true", f.level.Level())
	}
}

type nodeInfo struct{}

func (nodeInfo) PodMTU() int       { return 1450 }
func (nodeInfo) PodDevice() string { return "netkit" }

// The CNI plugin sizes and chooses the pod's device pair by GET /v1/config.
func TestConfigTellsPodDevice(t *testing.T) {
	f := newFixture(t)
	var c models.Config
	f.do(t, "GET", "/v1/config", "", &c)
	if c.PodMTU != 0 || c.PodDevice != "" {
		t.Fatalf("without node info: %+v", c)
	}
	f.s.p.Node = nodeInfo{}
	f.do(t, "GET", "/v1/config", "", &c)
	if c.PodMTU != 1450 || c.PodDevice != "netkit" {
		t.Fatalf("config %+v, want MTU 1450 and netkit pairs", c)
	}
}

func TestHealthzReportsDegraded(t *testing.T) {
	f := newFixture(t)
	var h models.Health
	f.hr.Scope("ipam").OK("ready")
	if code := f.do(t, "GET", "/v1/healthz", "", &h); code != 200 || !h.OK || len(h.Modules) != 1 {
		t.Fatalf("healthy: %d %+v", code, h)
	}
	f.hr.Scope("datapath").Degraded("start", errors.New("no bpffs"))
	if code := f.do(t, "GET", "/v1/healthz", "", &h); code != 503 || h.OK || h.Modules[0].Error != "no bpffs" {
		t.Fatalf("degraded: %d %+v", code, h)
	}
}

func TestOpenAPIServed(t *testing.T) {
	f := newFixture(t)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/openapi.yaml", nil))
	if rec.Code != 200 || !bytes.HasPrefix(rec.Body.Bytes(), []byte("openapi: 3.")) {
		t.Fatalf("GET /v1/openapi.yaml: %d %.40q", rec.Code, rec.Body.String())
	}
}

// FuzzDecodeEndpointRequest feeds arbitrary bodies through the decoding
// and validation that PUT /v1/endpoint runs: nothing may panic, and a
// request that validates survives a round trip unchanged.
func FuzzDecodeEndpointRequest(f *testing.F) {
	f.Add([]byte(endpointBody("abc", "10.0.1.1")))
	f.Add([]byte(`{"containerID":"a","ipv4":"1.2.3.4","mac":"zz"}`))
	f.Add([]byte(`{"hostIfindex": 1e40}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req models.EndpointRequest
		if err := Decode(bytes.NewReader(b), &req); err != nil {
			return
		}
		spec, err := toSpec(req)
		if err != nil {
			return
		}
		again, _ := json.Marshal(req)
		var req2 models.EndpointRequest
		if err := Decode(bytes.NewReader(again), &req2); err != nil || req2 != req {
			t.Fatalf("round trip: %v %+v vs %+v", err, req2, req)
		}
		if spec.IPv4.String() == "" || spec.HostIfindex <= 0 {
			t.Fatalf("valid spec with empty fields: %+v", spec)
		}
	})
}
