package ui

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cilium-go/cilium/pkg/hubble/container"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
	"github.com/cilium-go/cilium/test/browser"
)

// markup is what a pod may put in its requests' URLs: on the page it must
// stay text.
const markup = `/<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`

// shopFlows: a client calls web through its Service (allowed by a
// policy), and admin, which a deny policy drops; one HTTP request with
// markup in its URL.
func shopFlows(ring *container.Ring) {
	ep := func(pod, workload string) func(*flow.Flow) *flow.Endpoint {
		return func(*flow.Flow) *flow.Endpoint {
			return &flow.Endpoint{Namespace: "shop", PodName: pod, Identity: 1000 + uint32(len(pod)),
				Labels: []string{"k8s:app=" + workload}, Workloads: []*flow.Workload{{Name: workload, Kind: "Deployment"}}}
		}
	}
	client, web, admin := ep("client-1", "client"), ep("web-1", "web"), ep("admin-1", "admin")
	tcp := func(port uint32) *flow.Layer4 {
		return &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 40000, DestinationPort: port}}}
	}
	now := time.Now()
	for i := range 5 {
		f := &flow.Flow{Time: timestamppb.New(now.Add(time.Duration(i) * time.Millisecond)), Verdict: flow.Verdict_FORWARDED,
			L4: tcp(8080), DestinationService: &flow.Service{Namespace: "shop", Name: "web"},
			IngressAllowedBy: []*flow.Policy{{Name: "allow-web", Namespace: "shop", Kind: "CiliumNetworkPolicy"}}}
		f.Source, f.Destination = client(f), web(f)
		ring.Write(container.Event{Flow: f})
	}
	for i := range 3 {
		f := &flow.Flow{Time: timestamppb.New(now.Add(time.Duration(10+i) * time.Millisecond)), Verdict: flow.Verdict_DROPPED,
			DropReasonDesc: flow.DropReason_POLICY_DENY, L4: tcp(9090),
			IngressDeniedBy: []*flow.Policy{{Name: "deny-admin", Namespace: "shop", Kind: "CiliumNetworkPolicy"}}}
		f.Source, f.Destination = client(f), admin(f)
		ring.Write(container.Event{Flow: f})
	}
	f := &flow.Flow{Time: timestamppb.New(now.Add(20 * time.Millisecond)), Verdict: flow.Verdict_FORWARDED, L4: tcp(8080),
		Type: flow.FlowType_L7, EventType: &flow.CiliumEventType{Type: 129},
		L7: &flow.Layer7{Type: flow.L7FlowType_REQUEST, Record: &flow.Layer7_Http{Http: &flow.HTTP{Method: "GET", Url: "http://web" + markup}}}}
	f.Source, f.Destination = client(f), web(f)
	ring.Write(container.Event{Flow: f})
}

// inEachBrowser runs test in every browser engine, as a subtest named
// after it: the Hubble UI must work in Chromium and Firefox alike.
func inEachBrowser(t *testing.T, test func(t *testing.T, e browser.Engine)) {
	for _, e := range browser.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			e.Require(t)
			test(t, e)
		})
	}
}

// launch starts e's browser for the test, closed when it ends.
func launch(t *testing.T, ctx context.Context, e browser.Engine, opts browser.Options) browser.Page {
	t.Helper()
	b, err := e.Launch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close the browser: %v", err)
		}
	})
	return b
}

// page opens the embedded page of a backend with shopFlows on
// ?namespace=shop in e's headless browser.
func page(t *testing.T, e browser.Engine) (browser.Page, context.Context) {
	t.Helper()
	b, ctx, _ := pageOf(t, e)
	return b, ctx
}

// pageOf is page, with the ring the backend's flows come from.
func pageOf(t *testing.T, e browser.Engine) (browser.Page, context.Context, *container.Ring) {
	t.Helper()
	b, ctx, ring, _ := pageWith(t, e, &tracer{})
	return b, ctx, ring
}

// pageWith is pageOf whose backend asks tr for traces.
func pageWith(t *testing.T, e browser.Engine, tr *tracer) (browser.Page, context.Context, *container.Ring, *tracer) {
	t.Helper()
	ring := newRing(t)
	shopFlows(ring)
	srv := newServer(t, ring, tr, Assets())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	b := launch(t, ctx, e, browser.Options{Width: 1400, Height: 900})
	if err := b.Navigate(ctx, srv.URL+"/?namespace=shop"); err != nil {
		t.Fatal(err)
	}
	return b, ctx, ring, tr
}

// wait fails the test unless js becomes true within a minute.
func wait(t *testing.T, ctx context.Context, b browser.Page, what, js string) {
	t.Helper()
	if err := b.WaitFor(ctx, js, time.Minute); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// shot saves the page for review into the test's artifacts (go test
// -artifacts keeps them).
func shot(t *testing.T, ctx context.Context, b browser.Page, name string) {
	t.Helper()
	if err := b.Screenshot(ctx, filepath.Join(t.ArtifactDir(), name)); err != nil {
		t.Error(err)
	}
}

// typeFilter types text into the flow table's filter.
func typeFilter(t *testing.T, ctx context.Context, b browser.Page, text string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const f = document.getElementById('filter'); f.value = %q; f.dispatchEvent(new Event('input')); return true })()`, text)
	var ok bool
	if err := b.Eval(ctx, js, &ok); err != nil {
		t.Fatal(err)
	}
}

const (
	cardTitles = `[...document.querySelectorAll('#map .card')].map(c => c.dataset.title).sort().join(',')`
	dropEdge   = `document.querySelector('.edge-group[data-from="app:client"][data-to="app:admin"]')`
	rowsShown  = `[...document.querySelectorAll('#table .rows .row')].filter(r => r.checkVisibility())`
)

func TestPageDrawsTheMapAndNamesTheDenyingPolicy(t *testing.T) {
	inEachBrowser(t, func(t *testing.T, e browser.Engine) {
		b, ctx := page(t, e)
		wait(t, ctx, b, "cards for the workloads and the Service", cardTitles+` === 'admin,client,web,web'`)
		wait(t, ctx, b, "the Service's edge forwarded",
			`document.querySelector('.edge-group[data-from="app:client"][data-to="service:web"]')?.dataset.verdict === 'forwarded'`)
		wait(t, ctx, b, "the drop's edge red, naming the policy without a click",
			dropEdge+`?.dataset.verdict === 'dropped' && `+dropEdge+`.dataset.label.includes('denied by deny-admin')`)
		shot(t, ctx, b, "map.png")

		typeFilter(t, ctx, b, "--verdict DROPPED")
		wait(t, ctx, b, "only drops in the table", `(r => r.length === 3 && r.every(x => x.dataset.verdict === 'DROPPED'))(`+rowsShown+`)`)
		shot(t, ctx, b, "drops.png")
		typeFilter(t, ctx, b, "--verdict MAYBE")
		wait(t, ctx, b, "a bad filter named", `document.getElementById('filter-error').textContent.includes('verdict "MAYBE" is not one of')`)
		typeFilter(t, ctx, b, "--type l7 --http-method GET")
		wait(t, ctx, b, "the L7 flow alone", `(r => r.length === 1 && r[0].textContent.includes('GET http://web/<img'))(`+rowsShown+`)`)
		if errs := b.Errors(); len(errs) > 0 {
			t.Errorf("page errors: %v", errs)
		}
	})
}

// A pod writes its URLs: on the page they are text, in the table and in
// the detail pane, and nothing of them runs.
func TestPodWrittenTextStaysText(t *testing.T) {
	inEachBrowser(t, func(t *testing.T, e browser.Engine) {
		b, ctx := page(t, e)
		typeFilter(t, ctx, b, "--type l7")
		wait(t, ctx, b, "the L7 row", `(r => r.length === 1)(`+rowsShown+`)`)
		var ok bool
		if err := b.Eval(ctx, `(`+rowsShown+`)[0].click() || true`, &ok); err != nil {
			t.Fatal(err)
		}
		wait(t, ctx, b, "the detail pane's URL as it was written",
			fmt.Sprintf(`[...document.querySelectorAll('#panel .fields td')].some(td => td.textContent === %q)`, "http://web"+markup))
		var got struct {
			Pwned  any `json:"pwned"`
			Images int `json:"images"`
			Script int `json:"scripts"`
		}
		if err := b.Eval(ctx, `({pwned: window.__pwned ?? null, images: document.querySelectorAll('img').length,
			scripts: document.querySelectorAll('body script').length})`, &got); err != nil {
			t.Fatal(err)
		}
		if got.Pwned != nil || got.Images != 0 || got.Script != 0 {
			t.Errorf("markup from a flow became elements: %+v", got)
		}
	})
}

func TestWhyShowsTheDenyingRuleAndItsYAML(t *testing.T) {
	inEachBrowser(t, func(t *testing.T, e browser.Engine) {
		b, ctx, _, tr := pageWith(t, e, &tracer{})
		wait(t, ctx, b, "the drop's edge", dropEdge+` !== null`)
		// Another namespace and back: the map is new, the why form's
		// one listener is not.
		var ok bool
		for _, ns := range []string{"kube-system", "shop"} {
			if err := b.Eval(ctx, fmt.Sprintf(`(s => { s.value = %q; s.dispatchEvent(new Event('change')); return true })(document.getElementById('namespace'))`, ns), &ok); err != nil {
				t.Fatal(err)
			}
		}
		wait(t, ctx, b, "the drop's edge again", dropEdge+` !== null`)
		if err := b.Eval(ctx, dropEdge+`.dispatchEvent(new MouseEvent('click', {bubbles: true})) || true`, &ok); err != nil {
			t.Fatal(err)
		}
		wait(t, ctx, b, "the edge's peers prefilled", `document.getElementById('why-src').value === 'shop/client-1' &&
			document.getElementById('why-dst').value === 'shop/admin-1' && document.getElementById('why-port').value === '9090'`)
		if err := b.Eval(ctx, `document.querySelector('#why-form button').click() || true`, &ok); err != nil {
			t.Fatal(err)
		}
		wait(t, ctx, b, "the verdict and the rule", `document.querySelector('#why-result .verdict')?.dataset.allowed === 'false' &&
			document.getElementById('why-result').textContent.includes('CiliumNetworkPolicy shop/deny')`)
		shot(t, ctx, b, "why.png")
		if n := tr.calls.Load(); n != 1 {
			t.Errorf("one click of Trace asked the agent %d times", n)
		}
		// The agent's own rules have no YAML to link to.
		wait(t, ctx, b, "a builtin rule named, not linked", `document.querySelector('#why-result .policy-builtin')?.textContent === 'builtin allow-all' &&
			document.querySelector('#why-result .policy-link[data-name="allow-all"]') === null`)
		if err := b.Eval(ctx, `document.querySelector('#why-result .policy-link[data-name="deny"]').click() || true`, &ok); err != nil {
			t.Fatal(err)
		}
		wait(t, ctx, b, "the policy's YAML", `document.querySelector('#panel-body pre.yaml')?.textContent.includes('name: deny')`)
		if errs := b.Errors(); len(errs) > 0 {
			t.Errorf("page errors: %v", errs)
		}
	})
}

// An exporter's file, loaded into the page, is browsed like a cluster.
func TestReplayOfAnExportFile(t *testing.T) {
	inEachBrowser(t, func(t *testing.T, e browser.Engine) {
		b, ctx := page(t, e)
		var lines []string
		for i := range 4 {
			resp := &observer.GetFlowsResponse{NodeName: "node-1", Time: timestamppb.Now(), ResponseTypes: &observer.GetFlowsResponse_Flow{Flow: &flow.Flow{
				Verdict: flow.Verdict_FORWARDED, Time: timestamppb.Now(),
				Source:      &flow.Endpoint{Namespace: "replayed", PodName: fmt.Sprintf("a-%d", i), Workloads: []*flow.Workload{{Name: "a", Kind: "Deployment"}}},
				Destination: &flow.Endpoint{Namespace: "replayed", PodName: "b-0", Workloads: []*flow.Workload{{Name: "b", Kind: "StatefulSet"}}},
				L4:          &flow.Layer4{Protocol: &flow.Layer4_UDP{UDP: &flow.UDP{SourcePort: 5000, DestinationPort: 53}}},
			}}}
			line, err := jsonFlow.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(line))
		}
		// And one of another namespace, which the first does not show.
		other, err := jsonFlow.Marshal(&observer.GetFlowsResponse{NodeName: "node-1", ResponseTypes: &observer.GetFlowsResponse_Flow{Flow: &flow.Flow{
			Verdict:     flow.Verdict_DROPPED,
			Source:      &flow.Endpoint{Namespace: "zzz", PodName: "c-0", Labels: []string{"k8s:app=c"}},
			Destination: &flow.Endpoint{Namespace: "zzz", PodName: "d-0", Labels: []string{"k8s:app=d"}},
			L4:          &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 5000, DestinationPort: 80}}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(other))
		file := filepath.Join(t.TempDir(), "events.log")
		if err := os.WriteFile(file, []byte(strings.Join(append(lines, "not json", ""), "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := b.SetFileInput(ctx, "#replay", file); err != nil {
			t.Fatal(err)
		}
		wait(t, ctx, b, "the file's namespace and cards", `document.getElementById('namespace').value === 'replayed' && `+cardTitles+` === 'a,b'`)
		wait(t, ctx, b, "the replay named, its bad line counted", `document.getElementById('status').textContent.includes('replay of events.log: 5 records, 1 lines not JSON')`)
		wait(t, ctx, b, "the edge", `document.querySelector('.edge-group[data-port="UDP/53"]')?.dataset.verdict === 'forwarded'`)
		wait(t, ctx, b, "the namespace's flows alone in the table", `(r => r.length === 4)(`+rowsShown+`)`)
		var ok bool
		if err := b.Eval(ctx, `(s => { s.value = 'zzz'; s.dispatchEvent(new Event('change')); return true })(document.getElementById('namespace'))`, &ok); err != nil {
			t.Fatal(err)
		}
		wait(t, ctx, b, "the file's other namespace", cardTitles+` === 'c,d' && (r => r.length === 1 && r[0].dataset.verdict === 'DROPPED')(`+rowsShown+`)`)
	})
}

// A relay that fails (restarting, say) is asked again: the live page
// recovers without a reload.
// Flows that keep arriving, a few at a time, are all drawn, the last
// ones too, though the table redraws at most ten times a second.
func TestTheTableShowsTheLastFlowToArrive(t *testing.T) {
	inEachBrowser(t, func(t *testing.T, e browser.Engine) {
		b, ctx, ring := pageOf(t, e)
		wait(t, ctx, b, "the first flows", `(r => r.length > 0)(`+rowsShown+`)`)
		const n = 12
		pace := time.NewTicker(30 * time.Millisecond)
		defer pace.Stop()
		for i := range n {
			<-pace.C
			ring.Write(container.Event{Flow: podFlow(i, "shop/late-"+fmt.Sprint(i), "shop/web-1", func(f *flow.Flow) {
				f.Time = timestamppb.Now()
				f.L4 = &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 1, DestinationPort: 8080}}}
			})})
		}
		wait(t, ctx, b, "the last flow on the table's first row",
			fmt.Sprintf(`(`+rowsShown+`).some(r => r.style.top === '0px' && r.textContent.includes('shop/late-%d'))`, n-1))
	})
}

func TestPageRetriesARelayThatFailed(t *testing.T) {
	inEachBrowser(t, func(t *testing.T, e browser.Engine) {
		sock := filepath.Join(t.TempDir(), "relay.sock")
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		s := &Server{Relay: observer.NewObserverClient(conn), Cluster: NewCluster(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(
			runtime.NewScheme(), listKinds)), Log: slog.New(slog.DiscardHandler)}
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		b := launch(t, ctx, e, browser.Options{})
		if err := b.Navigate(ctx, srv.URL+"/?namespace=shop"); err != nil {
			t.Fatal(err)
		}
		wait(t, ctx, b, "the relay's failure told, and a retry", `document.getElementById('status').textContent.includes('again in 3s')`)

		ring := newRing(t)
		shopFlows(ring)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		g := grpc.NewServer()
		observer.RegisterObserverServer(g, hubbleobserver.New(ring, "node-1", "test"))
		go g.Serve(ln)
		t.Cleanup(g.Stop)
		wait(t, ctx, b, "the map once the relay answers", cardTitles+` === 'admin,client,web,web'`)
	})
}
