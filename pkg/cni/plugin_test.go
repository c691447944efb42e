package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/identity"
)

func TestParseConf(t *testing.T) {
	for _, tc := range []struct {
		conf string
		code uint
		want string
	}{
		{`{"cniVersion":"1.1.0","name":"n","type":"cilium-cni"}`, 0, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"cilium-cni","mtu":1450,"socket-path":"/run/x.sock"}`, 0, ""},
		{`{"cniVersion":`, types.ErrDecodingFailure, "does not parse"},
		{`{"cniVersion":"1.1.0","mtu":100}`, types.ErrInvalidNetworkConfig, "mtu: 100"},
		{`{"cniVersion":"1.1.0","mtu":"big"}`, types.ErrDecodingFailure, "mtu"},
		{`{"cniVersion":"1.1.0","socket-path":"rel.sock"}`, types.ErrInvalidNetworkConfig, "socket-path"},
		{`{"cniVersion":"1.1.0","prevResult":{"cniVersion":"1.1.0","ips":"x"}}`, types.ErrDecodingFailure, "prevResult"},
	} {
		c, err := ParseConf([]byte(tc.conf))
		if tc.code == 0 {
			if err != nil || c == nil {
				t.Errorf("%s: %v", tc.conf, err)
			}
			continue
		}
		var e *types.Error
		if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Msg+" "+e.Details, tc.want) {
			t.Errorf("%s: %v, want code %d with %q", tc.conf, err, tc.code, tc.want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=prod;K8S_POD_NAME=web-1;K8S_POD_UID=u;OTHER=x")
	if err != nil || a.K8S_POD_NAME != "web-1" || a.K8S_POD_NAMESPACE != "prod" || a.K8S_POD_UID != "u" {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := ParseArgs("garbage"); err == nil {
		t.Fatal("CNI_ARGS without key=value accepted")
	}
	if a, err := ParseArgs(""); err != nil || a.K8S_POD_NAME != "" {
		t.Fatalf("empty CNI_ARGS: %+v %v", a, err)
	}
}

func TestHostIfName(t *testing.T) {
	a, b := HostIfName("c1", "eth0"), HostIfName("c1", "eth1")
	if a == b || len(a) > 15 || !strings.HasPrefix(a, "lxc") || a != HostIfName("c1", "eth0") {
		t.Fatalf("%q %q", a, b)
	}
}

// fakeAgent is the agent's API in memory.
type fakeAgent struct {
	down      bool
	degraded  bool
	putErr    error
	mtu       int
	device    string
	allocated map[string]string // owner -> ip
	eps       map[string]models.Endpoint
}

func newFakeAgent() *fakeAgent {
	return &fakeAgent{allocated: map[string]string{}, eps: map[string]models.Endpoint{}}
}

var errDial = &net.OpError{Op: "dial", Net: "unix", Err: errors.New("connection refused")}

func (f *fakeAgent) Healthz(context.Context) (models.Health, error) {
	switch {
	case f.down:
		return models.Health{}, errDial
	case f.degraded:
		return models.Health{}, &models.Error{Code: 503, Message: "degraded"}
	}
	return models.Health{OK: true}, nil
}

func (f *fakeAgent) AllocateIP(_ context.Context, owner string) (models.IPAMResponse, error) {
	if f.down {
		return models.IPAMResponse{}, errDial
	}
	ip := fmt.Sprintf("10.0.0.%d", len(f.allocated)+1)
	f.allocated[owner] = ip
	return models.IPAMResponse{Address: ip, Gateway: "169.254.1.1", PodCIDR: "10.0.0.0/24"}, nil
}

func (f *fakeAgent) Config(context.Context) (models.Config, error) {
	if f.down {
		return models.Config{}, errDial
	}
	return models.Config{PodMTU: f.mtu, PodDevice: f.device}, nil
}

func (f *fakeAgent) ReleaseIP(context.Context, string) error { return nil }

func (f *fakeAgent) PutEndpoint(_ context.Context, r models.EndpointRequest) (models.Endpoint, error) {
	if f.putErr != nil {
		return models.Endpoint{}, f.putErr
	}
	ep := models.Endpoint{ID: uint16(len(f.eps) + 1), ContainerID: r.ContainerID, IPv4: r.IPv4, IfName: r.IfName,
		HostIfName: r.HostIfName, HostIfindex: r.HostIfindex, NetNSPath: r.NetNSPath}
	f.eps[r.ContainerID] = ep
	return ep, nil
}

func (f *fakeAgent) GetEndpoint(_ context.Context, cid string) (models.Endpoint, error) {
	ep, ok := f.eps[cid]
	if !ok {
		return ep, &models.Error{Code: http.StatusNotFound, Message: "not found"}
	}
	return ep, nil
}

func (f *fakeAgent) DeleteEndpoint(_ context.Context, cid string) error {
	if f.down {
		return errDial
	}
	delete(f.allocated, cid)
	if _, ok := f.eps[cid]; !ok {
		return &models.Error{Code: http.StatusNotFound, Message: "not found"}
	}
	delete(f.eps, cid)
	return nil
}

func (f *fakeAgent) Allocations(context.Context) ([]models.IPAMAllocation, error) {
	if f.down {
		return nil, errDial
	}
	var out []models.IPAMAllocation
	for owner, ip := range f.allocated {
		out = append(out, models.IPAMAllocation{IP: ip, Owner: owner})
	}
	return out, nil
}

func (f *fakeAgent) Endpoints(context.Context) ([]models.Endpoint, error) {
	var out []models.Endpoint
	for _, e := range f.eps {
		out = append(out, e)
	}
	return out, nil
}

// fakeLinks keeps veths as names.
type fakeLinks struct{ links map[string]podlink.Link }

func (l *fakeLinks) funcs() Links {
	return Links{
		Create: func(p podlink.Link) (podlink.Result, error) {
			if _, dup := l.links[p.HostIfName]; dup {
				return podlink.Result{}, errors.New("exists")
			}
			l.links[p.HostIfName] = p
			return podlink.Result{PodMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
				HostMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, HostIfindex: 9}, nil
		},
		Delete: func(_, name string) error { delete(l.links, name); return nil },
		Check: func(p podlink.Link, idx int) error {
			if _, ok := l.links[p.HostIfName]; !ok || idx != 9 {
				return errors.New("gone")
			}
			return nil
		},
	}
}

type pluginFixture struct {
	p     *Plugin
	agent *fakeAgent
	links *fakeLinks
	out   *bytes.Buffer
	netns string
}

func newPluginFixture(t *testing.T) *pluginFixture {
	f := &pluginFixture{agent: newFakeAgent(), links: &fakeLinks{links: map[string]podlink.Link{}},
		out: &bytes.Buffer{}, netns: filepath.Join(t.TempDir(), "netns")}
	os.WriteFile(f.netns, nil, 0o600)
	f.p = &Plugin{NewAgent: func(string) Agent { return f.agent }, Links: f.links.funcs(), Timeout: time.Minute, Stdout: f.out}
	return f
}

const testConf = `{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni"}`

func (f *pluginFixture) args(cid string, conf string) *skel.CmdArgs {
	return &skel.CmdArgs{ContainerID: cid, Netns: f.netns, IfName: "eth0",
		Args: "K8S_POD_NAME=web;K8S_POD_NAMESPACE=prod", StdinData: []byte(conf)}
}

func cniCode(t *testing.T, err error) uint {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not a CNI error", err)
	}
	return e.Code
}

func TestAddCheckDel(t *testing.T) {
	f := newPluginFixture(t)
	if err := f.p.Add(f.args("c1", testConf)); err != nil {
		t.Fatal(err)
	}
	var res current.Result
	if err := json.Unmarshal(f.out.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", f.out.String(), err)
	}
	if res.CNIVersion != "1.1.0" || len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.0.0.1/32" ||
		res.IPs[0].Gateway.String() != "169.254.1.1" || res.Interfaces[1].Sandbox != f.netns {
		t.Fatalf("result %s", f.out.String())
	}
	prev := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni","prevResult":%s}`, f.out.String())
	if err := f.p.Check(f.args("c1", prev)); err != nil {
		t.Fatalf("CHECK: %v", err)
	}
	if err := f.p.Check(f.args("c1", testConf)); cniCode(t, err) != types.ErrInvalidNetworkConfig {
		t.Fatalf("CHECK without prevResult: %v", err)
	}
	for i := range 2 {
		if err := f.p.Del(f.args("c1", testConf)); err != nil {
			t.Fatalf("DEL %d: %v", i, err)
		}
	}
	if len(f.links.links) != 0 || len(f.agent.allocated) != 0 {
		t.Fatalf("left: links %v, addresses %v", f.links.links, f.agent.allocated)
	}
	if err := f.p.Check(f.args("c1", prev)); cniCode(t, err) != types.ErrUnknownContainer {
		t.Fatalf("CHECK after DEL: %v", err)
	}
}

func TestAddMTU(t *testing.T) {
	for _, tc := range []struct {
		conf           string
		agentMTU, want int
	}{
		{testConf, 1450, 1450},
		{testConf, 0, 0}, // the datapath's default
		{`{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni","mtu":9000}`, 1450, 9000},
	} {
		f := newPluginFixture(t)
		f.agent.mtu = tc.agentMTU
		if err := f.p.Add(f.args("c1", tc.conf)); err != nil {
			t.Fatal(err)
		}
		if got := f.links.links[HostIfName("c1", "eth0")].MTU; got != tc.want {
			t.Errorf("%s with agent MTU %d: link MTU %d, want %d", tc.conf, tc.agentMTU, got, tc.want)
		}
	}
}

// The pair is the kind the agent's --datapath-mode names; CHECK holds it
// to that kind, and a kind the plugin does not know fails ADD cleanly.
func TestAddPodDevice(t *testing.T) {
	for _, tc := range []struct{ agent, want string }{
		{"", "veth"}, // an agent that predates the field
		{"veth", "veth"},
		{"netkit", "netkit"},
	} {
		f := newPluginFixture(t)
		f.agent.device = tc.agent
		if err := f.p.Add(f.args("c1", testConf)); err != nil {
			t.Fatal(err)
		}
		if got := f.links.links[HostIfName("c1", "eth0")].Device; string(got) != tc.want {
			t.Errorf("agent device %q: pair %q, want %q", tc.agent, got, tc.want)
		}
		var checked podlink.Device
		check := f.p.Links.Check
		f.p.Links.Check = func(l podlink.Link, idx int) error { checked = l.Device; return check(l, idx) }
		prev := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni","prevResult":%s}`, f.out.String())
		if err := f.p.Check(f.args("c1", prev)); err != nil || string(checked) != tc.want {
			t.Errorf("agent device %q: CHECK %v as %q, want %q", tc.agent, err, checked, tc.want)
		}
	}
	f := newPluginFixture(t)
	f.agent.device = "netkit-l3"
	err := f.p.Add(f.args("c1", testConf))
	if cniCode(t, err) != types.ErrInternal || !strings.Contains(err.Error(), "netkit-l3") {
		t.Fatalf("ADD with an unknown device: %v", err)
	}
	if len(f.links.links) != 0 || len(f.agent.allocated) != 0 {
		t.Fatalf("left: links %v, addresses %v", f.links.links, f.agent.allocated)
	}
}

func TestAddAgainReplacesEndpoint(t *testing.T) {
	f := newPluginFixture(t)
	for i := range 2 {
		f.out.Reset()
		if err := f.p.Add(f.args("c1", testConf)); err != nil {
			t.Fatalf("ADD %d: %v", i, err)
		}
	}
	if len(f.agent.eps) != 1 || len(f.links.links) != 1 || len(f.agent.allocated) != 1 {
		t.Fatalf("after two ADDs: endpoints %v, links %v, addresses %v", f.agent.eps, f.links.links, f.agent.allocated)
	}
	prev := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni","prevResult":%s}`, f.out.String())
	if err := f.p.Check(f.args("c1", prev)); err != nil {
		t.Fatalf("CHECK after the second ADD: %v", err)
	}
}

func TestAddFailureCleansUp(t *testing.T) {
	f := newPluginFixture(t)
	f.agent.putErr = &models.Error{Code: 500, Message: "program endpoint: verifier"}
	err := f.p.Add(f.args("c1", testConf))
	if cniCode(t, err) != types.ErrInternal || !strings.Contains(err.Error(), "create endpoint") {
		t.Fatalf("ADD: %v", err)
	}
	if len(f.links.links) != 0 || len(f.agent.allocated) != 0 {
		t.Fatalf("left: links %v, addresses %v", f.links.links, f.agent.allocated)
	}
}

func TestArgumentErrors(t *testing.T) {
	f := newPluginFixture(t)
	for name, tc := range map[string]struct {
		tweak func(*skel.CmdArgs)
		code  uint
	}{
		"no container": {func(a *skel.CmdArgs) { a.ContainerID = "" }, types.ErrInvalidEnvironmentVariables},
		"no ifname":    {func(a *skel.CmdArgs) { a.IfName = "" }, types.ErrInvalidEnvironmentVariables},
		"long ifname":  {func(a *skel.CmdArgs) { a.IfName = "a-very-long-ifname" }, types.ErrInvalidEnvironmentVariables},
		"no netns":     {func(a *skel.CmdArgs) { a.Netns = "" }, types.ErrInvalidEnvironmentVariables},
		"gone netns":   {func(a *skel.CmdArgs) { a.Netns = "/nonexistent/netns" }, types.ErrInvalidNetNS},
		"bad args":     {func(a *skel.CmdArgs) { a.Args = "novalue" }, types.ErrInvalidEnvironmentVariables},
		"bad conf":     {func(a *skel.CmdArgs) { a.StdinData = []byte("{") }, types.ErrDecodingFailure},
	} {
		a := f.args("c1", testConf)
		tc.tweak(a)
		if code := cniCode(t, f.p.Add(a)); code != tc.code {
			t.Errorf("%s: code %d, want %d", name, code, tc.code)
		}
	}
	if len(f.agent.allocated) != 0 {
		t.Fatalf("addresses taken by failed ADDs: %v", f.agent.allocated)
	}
}

func TestDelWithoutNetnsOrEndpoint(t *testing.T) {
	f := newPluginFixture(t)
	a := f.args("unknown", testConf)
	a.Netns = ""
	if err := f.p.Del(a); err != nil {
		t.Fatalf("DEL of an unknown container without netns: %v", err)
	}
	f.agent.down = true
	if code := cniCode(t, f.p.Del(a)); code != types.ErrTryAgainLater {
		t.Fatalf("DEL with the agent down: code %d, want %d", code, types.ErrTryAgainLater)
	}
}

func TestStatus(t *testing.T) {
	f := newPluginFixture(t)
	a := &skel.CmdArgs{StdinData: []byte(testConf)}
	if err := f.p.Status(a); err != nil {
		t.Fatal(err)
	}
	f.agent.degraded = true
	if code := cniCode(t, f.p.Status(a)); code != types.ErrLimitedConnectivity {
		t.Fatalf("degraded: %d", code)
	}
	f.agent.down = true
	err := f.p.Status(a)
	if cniCode(t, err) != types.ErrPluginNotAvailable || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("down: %v", err)
	}
}

func TestGC(t *testing.T) {
	f := newPluginFixture(t)
	for _, c := range []string{"keep", "drop"} {
		if err := f.p.Add(f.args(c, testConf)); err != nil {
			t.Fatal(err)
		}
	}
	// The agent's health endpoint, which no runtime knows of.
	f.agent.eps["cilium-health"] = models.Endpoint{ID: 9, ContainerID: "cilium-health", Identity: identity.Health,
		IfName: "cilium", HostIfName: "lxc_health"}
	f.agent.allocated["cilium-health"] = "10.0.0.9"
	gc := `{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni",
		"cni.dev/valid-attachments":[{"containerID":"keep","ifname":"eth0"}]}`
	if err := f.p.GC(&skel.CmdArgs{StdinData: []byte(gc)}); err != nil {
		t.Fatal(err)
	}
	_, health := f.agent.eps["cilium-health"]
	if _, ok := f.agent.eps["keep"]; !ok || !health || len(f.agent.eps) != 2 || f.agent.allocated["cilium-health"] == "" {
		t.Fatalf("endpoints after GC: %v, addresses %v", f.agent.eps, f.agent.allocated)
	}
	if _, ok := f.links.links[HostIfName("drop", "eth0")]; ok || len(f.links.links) != 1 {
		t.Fatalf("links after GC: %v", f.links.links)
	}
}

// TestGCReleasesAddressesOfInvalidAttachments: an address whose container
// has no valid attachment and no endpoint (an agent crash between the
// allocation and the endpoint) is freed; one of a valid container stays.
func TestGCReleasesAddressesOfInvalidAttachments(t *testing.T) {
	f := newPluginFixture(t)
	ctx := context.Background()
	for _, owner := range []string{"leaked", "starting"} {
		if _, err := f.agent.AllocateIP(ctx, owner); err != nil {
			t.Fatal(err)
		}
	}
	gc := `{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni",
		"cni.dev/valid-attachments":[{"containerID":"starting","ifname":"eth0"}]}`
	if err := f.p.GC(&skel.CmdArgs{StdinData: []byte(gc)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.agent.allocated["leaked"]; ok {
		t.Fatalf("the address of an invalid attachment survived GC: %v", f.agent.allocated)
	}
	if _, ok := f.agent.allocated["starting"]; !ok {
		t.Fatalf("the address of a valid attachment was freed: %v", f.agent.allocated)
	}
}

// TestGCWithoutValidAttachments: a GC whose configuration lacks the list
// is refused, naming the key, and deletes nothing; an explicit empty
// list (or libcni's null) deletes everything.
func TestGCWithoutValidAttachments(t *testing.T) {
	f := newPluginFixture(t)
	if err := f.p.Add(f.args("c1", testConf)); err != nil {
		t.Fatal(err)
	}
	err := f.p.GC(&skel.CmdArgs{StdinData: []byte(testConf)})
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig ||
		!strings.Contains(e.Msg, "cni.dev/valid-attachments") || !strings.Contains(e.Details, "cni.dev/valid-attachments") {
		t.Fatalf("GC without the key: %v, want code %d naming cni.dev/valid-attachments", err, types.ErrInvalidNetworkConfig)
	}
	if len(f.agent.eps) != 1 || len(f.links.links) != 1 || len(f.agent.allocated) != 1 {
		t.Fatalf("a refused GC deleted: endpoints %v links %v addresses %v", f.agent.eps, f.links.links, f.agent.allocated)
	}
	bad := `{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni","cni.dev/valid-attachments":[{"containerID":"c1"}]}`
	if err := f.p.GC(&skel.CmdArgs{StdinData: []byte(bad)}); cniCode(t, err) != types.ErrInvalidNetworkConfig || len(f.agent.eps) != 1 {
		t.Fatalf("GC with an attachment without ifname: %v, endpoints %v", err, f.agent.eps)
	}
	for _, list := range []string{`"cni.dev/valid-attachments":null`, `"cni.dev/valid-attachments":[]`, `"cni.dev/attachments":[]`} {
		if err := f.p.Add(f.args("c1", testConf)); err != nil {
			t.Fatal(err)
		}
		gc := `{"cniVersion":"1.1.0","name":"cilium","type":"cilium-cni",` + list + `}`
		if err := f.p.GC(&skel.CmdArgs{StdinData: []byte(gc)}); err != nil {
			t.Fatalf("%s: %v", list, err)
		}
		if len(f.agent.eps) != 0 || len(f.links.links) != 0 || len(f.agent.allocated) != 0 {
			t.Fatalf("%s: left endpoints %v links %v addresses %v", list, f.agent.eps, f.links.links, f.agent.allocated)
		}
	}
}
