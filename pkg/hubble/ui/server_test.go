package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
)

var t0 = time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)

func podFlow(n int, src, dst string, tweak ...func(*flow.Flow)) *flow.Flow {
	ep := func(s string) *flow.Endpoint {
		ns, pod, _ := strings.Cut(s, "/")
		return &flow.Endpoint{Namespace: ns, PodName: pod, Identity: 1000}
	}
	f := &flow.Flow{Time: timestamppb.New(t0.Add(time.Duration(n) * time.Millisecond)), Uuid: "f" + strings.Repeat("0", 3) + string(rune('a'+n%26)),
		Verdict: flow.Verdict_FORWARDED, Source: ep(src), Destination: ep(dst), NodeName: "node-1"}
	for _, tw := range tweak {
		tw(f)
	}
	return f
}

// relayOf serves ring's flows through the agent's own Observer server,
// whose filters select the namespace, over gRPC.
func relayOf(t *testing.T, ring *container.Ring) observer.ObserverClient {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "relay.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	observer.RegisterObserverServer(srv, hubbleobserver.New(ring, "node-1", "test"))
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return observer.NewObserverClient(conn)
}

func newRing(t *testing.T) *container.Ring {
	r, err := container.NewRing(1<<14 - 1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type tracer struct {
	args  []string
	err   error
	calls atomic.Int32
}

func (tr *tracer) PolicyTrace(_ context.Context, src, dst, protocol string, port uint16) (models.PolicyTrace, error) {
	tr.calls.Add(1)
	tr.args = []string{src, dst, protocol, string(rune('0' + port/10)), string(rune('0' + port%10))}
	return models.PolicyTrace{Protocol: protocol, Port: port,
		Egress:  models.PolicyVerdict{Allowed: true, DecidedBy: []models.PolicyOrigin{{Kind: "builtin", Name: "allow-all"}}},
		Ingress: models.PolicyVerdict{Enforced: true, DecidedBy: []models.PolicyOrigin{{Kind: "CiliumNetworkPolicy", Namespace: "shop", Name: "deny"}}}}, tr.err
}

var listKinds = map[schema.GroupVersionResource]string{
	namespaces:                                        "NamespaceList",
	policyKinds["NetworkPolicy"].gvr:                  "NetworkPolicyList",
	policyKinds["CiliumNetworkPolicy"].gvr:            "CiliumNetworkPolicyList",
	policyKinds["CiliumClusterwideNetworkPolicy"].gvr: "CiliumClusterwideNetworkPolicyList",
}

func object(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": spec}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetManagedFields(nil)
	return u
}

// stubPage stands for the built page where the tests are of the API.
var stubPage = fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>Hubble UI</title>")}}

// newServer serves the API over ring, and assets as the page (nil: the
// embedded one).
func newServer(t *testing.T, ring *container.Ring, tr Tracer, assets ...fs.FS) *httptest.Server {
	t.Helper()
	var page fs.FS = stubPage
	if len(assets) > 0 {
		page = assets[0]
	}
	cnp := object("cilium.io/v2", "CiliumNetworkPolicy", "shop", "deny", map[string]any{
		"endpointSelector": map[string]any{"matchLabels": map[string]any{"app": "web"}}})
	cnp.Object["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "kubectl"}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds,
		object("v1", "Namespace", "", "shop", nil), object("v1", "Namespace", "", "kube-system", nil), cnp)
	s := &Server{Relay: relayOf(t, ring), Cluster: NewCluster(dyn), Tracer: tr, Log: slog.New(slog.DiscardHandler),
		Assets: page}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

type event struct {
	name string
	data string
}

// readEvents reads server-sent events until the stream ends or stop
// says so.
func readEvents(t *testing.T, body io.Reader, stop func([]event) bool) []event {
	t.Helper()
	var out []event
	var cur event
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		case line == "":
			out = append(out, cur)
			cur = event{}
			if stop(out) {
				return out
			}
		default:
			t.Fatalf("unexpected line in the event stream: %q", line)
		}
	}
	return out
}

// flowsOf decodes the flows of "flows" events as the page does.
func flowsOf(t *testing.T, evs []event) []*flow.Flow {
	t.Helper()
	var out []*flow.Flow
	for _, ev := range evs {
		if ev.name != "flows" {
			continue
		}
		var batch []json.RawMessage
		if err := json.Unmarshal([]byte(ev.data), &batch); err != nil {
			t.Fatalf("flows event is not a JSON array: %v", err)
		}
		for _, raw := range batch {
			resp := &observer.GetFlowsResponse{}
			if err := protojson.Unmarshal(raw, resp); err != nil {
				t.Fatalf("not a GetFlowsResponse: %v: %s", err, raw)
			}
			out = append(out, resp.GetFlow())
		}
	}
	return out
}

func get(t *testing.T, srv *httptest.Server, path string, q url.Values) *http.Response {
	t.Helper()
	resp, err := http.Get(srv.URL + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func window() url.Values {
	return url.Values{"namespace": {"shop"}, "since": {t0.Add(-time.Second).Format(time.RFC3339)},
		"until": {t0.Add(time.Hour).Format(time.RFC3339)}}
}

func TestAWindowHasTheNamespacesFlowsOnly(t *testing.T) {
	ring := newRing(t)
	ring.Write(container.Event{Flow: podFlow(1, "shop/client", "shop/web")})
	ring.Write(container.Event{Flow: podFlow(2, "other/a", "other/b")})
	ring.Write(container.Event{Flow: podFlow(3, "other/a", "shop/web")})
	ring.Write(container.Event{Flow: podFlow(4, "shop/client", "kube-system/coredns")})
	ring.Write(container.Event{Flow: podFlow(5, "/", "other/b", func(f *flow.Flow) {
		f.Source = &flow.Endpoint{Identity: 2, Labels: []string{"reserved:world"}}
		f.DestinationService = &flow.Service{Namespace: "shop", Name: "web"}
	})})
	srv := newServer(t, ring, nil)
	resp := get(t, srv, "/api/flows", window())
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := readEvents(t, resp.Body, func([]event) bool { return false })
	if last := evs[len(evs)-1]; last.name != "end" {
		t.Errorf("a window ends with an end event, got %q", last.name)
	}
	var got []string
	for _, f := range flowsOf(t, evs) {
		got = append(got, f.GetSource().GetNamespace()+">"+f.GetDestination().GetNamespace())
	}
	if want := []string{"shop>shop", "other>shop", "shop>kube-system", ">other"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("flows %v, want %v", got, want)
	}
}

func TestFlowsArriveLiveInBatches(t *testing.T) {
	ring := newRing(t)
	srv := newServer(t, ring, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Since a time without until: the flows from then, then live. The
	// first flow says that the stream follows; the rest come after it.
	ring.Write(container.Event{Flow: podFlow(0, "shop/client", "shop/web")})
	q := url.Values{"namespace": {"shop"}, "since": {t0.Add(-time.Second).Format(time.RFC3339)}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/flows?"+q.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	const n = 2500
	following := make(chan struct{})
	go func() {
		select {
		case <-following:
		case <-ctx.Done():
			return
		}
		for i := 1; i < n; i++ {
			ring.Write(container.Event{Flow: podFlow(i, "shop/client", "shop/web")})
		}
	}()
	total := 0
	evs := readEvents(t, resp.Body, func(evs []event) bool {
		if total == 0 {
			close(following)
		}
		total = len(flowsOf(t, evs))
		return total >= n
	})
	if total != n {
		t.Fatalf("%d flows, want %d", total, n)
	}
	for _, ev := range evs {
		if got := len(flowsOf(t, []event{ev})); got > maxBatch {
			t.Errorf("a batch of %d flows, want at most %d", got, maxBatch)
		}
	}
	if len(evs) < n/maxBatch {
		t.Errorf("%d events for %d flows", len(evs), n)
	}
}

// A pod writes its HTTP URL; nothing in it may end an event early or
// add one.
func TestPodWrittenTextCannotForgeEvents(t *testing.T) {
	ring := newRing(t)
	forged := "/x\n\nevent: end\ndata: {}\n\n<script>alert(1)</script>\u2028"
	ring.Write(container.Event{Flow: podFlow(1, "shop/client", "shop/web", func(f *flow.Flow) {
		f.L7 = &flow.Layer7{Record: &flow.Layer7_Http{Http: &flow.HTTP{Method: "GET", Url: forged}}}
	})})
	srv := newServer(t, ring, nil)
	evs := readEvents(t, get(t, srv, "/api/flows", window()).Body, func([]event) bool { return false })
	if len(evs) != 2 || evs[0].name != "flows" || evs[1].name != "end" {
		t.Fatalf("events %+v, want one flows and one end", evs)
	}
	if got := flowsOf(t, evs)[0].GetL7().GetHttp().GetUrl(); got != forged {
		t.Errorf("url %q, want %q", got, forged)
	}
}

func TestBadRequestsNameWhatIsWrong(t *testing.T) {
	srv := newServer(t, newRing(t), &tracer{})
	cases := []struct {
		path string
		q    url.Values
		code int
		want string
	}{
		{"/api/flows", url.Values{"namespace": {"Shop_1"}}, 400, `namespace "Shop_1"`},
		{"/api/flows", url.Values{}, 400, `namespace ""`},
		{"/api/flows", url.Values{"namespace": {"shop"}, "since": {"yesterday"}}, 400, `since "yesterday": want an RFC 3339 time`},
		{"/api/flows", url.Values{"namespace": {"shop"}, "last": {"0"}}, 400, `last "0": want a number of flows from 1 to 65535`},
		{"/api/flows", url.Values{"namespace": {"shop"}, "last": {"-1"}}, 400, `last "-1"`},
		{"/api/flows", url.Values{"namespace": {"shop"}, "since": {"2026-12-05T14:00:00Z"}, "until": {"2026-12-05T13:00:00Z"}}, 400, "is not after since"},
		{"/api/policy", url.Values{"kind": {"Secret"}, "namespace": {"shop"}, "name": {"x"}}, 400, `kind "Secret"`},
		{"/api/policy", url.Values{"kind": {"CiliumClusterwideNetworkPolicy"}, "namespace": {"shop"}, "name": {"x"}}, 400, "has none"},
		{"/api/policy", url.Values{"kind": {"CiliumNetworkPolicy"}, "namespace": {"shop"}, "name": {"../x"}}, 400, `name "../x"`},
		{"/api/policy", url.Values{"kind": {"CiliumNetworkPolicy"}, "namespace": {"shop"}, "name": {"missing"}}, 404, "missing"},
		{"/api/trace", url.Values{"src": {"shop/client"}, "dst": {"shop/web"}, "dport": {"99999"}, "protocol": {"tcp"}}, 400, "dport"},
	}
	for _, c := range cases {
		resp := get(t, srv, c.path, c.q)
		var body struct{ Error string }
		err := json.NewDecoder(resp.Body).Decode(&body)
		if err != nil || resp.StatusCode != c.code || !strings.Contains(body.Error, c.want) {
			t.Errorf("%s?%s: %d %q (%v), want %d naming %q", c.path, c.q.Encode(), resp.StatusCode, body.Error, err, c.code, c.want)
		}
	}
}

func TestPolicyYAMLAndNamespaces(t *testing.T) {
	srv := newServer(t, newRing(t), nil)
	resp := get(t, srv, "/api/policy", url.Values{"kind": {"CiliumNetworkPolicy"}, "namespace": {"shop"}, "name": {"deny"}})
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "name: deny") || !strings.Contains(string(b), "app: web") ||
		strings.Contains(string(b), "managedFields") {
		t.Errorf("policy: %d\n%s", resp.StatusCode, b)
	}
	var ns struct{ Namespaces []string }
	if err := json.NewDecoder(get(t, srv, "/api/namespaces", nil).Body).Decode(&ns); err != nil ||
		strings.Join(ns.Namespaces, ",") != "kube-system,shop" {
		t.Errorf("namespaces %v, %v", ns.Namespaces, err)
	}
}

func TestTraceAsksTheAgent(t *testing.T) {
	tr := &tracer{}
	srv := newServer(t, newRing(t), tr)
	resp := get(t, srv, "/api/trace", url.Values{"src": {"shop/client"}, "dst": {"shop/web"}, "dport": {"80"}, "protocol": {"TCP"}})
	var got models.PolicyTrace
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d, %v", resp.StatusCode, err)
	}
	if strings.Join(tr.args, " ") != "shop/client shop/web tcp 8 0" || got.Ingress.DecidedBy[0].Name != "deny" {
		t.Errorf("agent asked %v, answer %+v", tr.args, got)
	}
	tr.err = &models.Error{Code: 400, Message: `src "shop/nobody": no such pod`}
	resp = get(t, srv, "/api/trace", url.Values{"src": {"shop/nobody"}, "dst": {"shop/web"}, "dport": {"80"}})
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "no such pod") {
		t.Errorf("agent's refusal: %d %s", resp.StatusCode, b)
	}
	tr.err = errors.New("agent unreachable")
	if resp := get(t, srv, "/api/trace", url.Values{"src": {"a"}, "dst": {"b"}, "dport": {"80"}}); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("unreachable agent: %d", resp.StatusCode)
	}
	off := newServer(t, newRing(t), nil)
	if resp := get(t, off, "/api/trace", url.Values{"src": {"a"}, "dst": {"b"}, "dport": {"80"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("trace off: %d", resp.StatusCode)
	}
}

func TestThePageKeepsToItsOrigin(t *testing.T) {
	srv := newServer(t, newRing(t), nil)
	resp := get(t, srv, "/", nil)
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "Hubble UI") {
		t.Errorf("index: %s", b)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no nosniff")
	}
}

// The embedded page is the one ui/ builds: the entry point and what it
// loads.
func TestTheEmbeddedPageIsComplete(t *testing.T) {
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		b, err := fs.ReadFile(Assets(), name)
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
