package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/test/browser"
)

// hubbleUIManifest: in a namespace of its own, a client that calls web
// through its Service, and admin, whose ingress a deny rule closes to the
// client.
var hubbleUIManifest = `apiVersion: v1
kind: Namespace
metadata: {name: ui-shop}
` + uiDeployments + `---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: ui-shop}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: deny-client-to-admin, namespace: ui-shop}
spec:
  endpointSelector: {matchLabels: {app: admin}}
  ingress: [{fromEntities: [cluster]}]
  ingressDeny: [{fromEndpoints: [{matchLabels: {app: client}}]}]
`

var uiDeployments = func() string {
	var b strings.Builder
	for _, app := range []string{"client", "web", "admin"} {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: ui-shop}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: %[1]s
        image: %[2]s
        args: ["netexec", "--http-port=8080"]
`, app, agnhost)
	}
	return b.String()
}()

// hubbleUIURL is where the host reaches the lab's Hubble UI (the lab's
// forwarder on its loopback), ending in a slash.
func (l *Lab) hubbleUIURL() string {
	l.t.Helper()
	url, err := os.ReadFile(filepath.Join(l.StateDir, "hubble-ui"))
	if err != nil {
		l.t.Fatalf("the lab's Hubble UI address: %v", err)
	}
	return strings.TrimSpace(string(url))
}

// uiPod is the name and address of app's one pod in ui-shop.
func (l *Lab) uiPod(app string) (name, ip string) {
	l.t.Helper()
	out := l.Kubectl("-n", "ui-shop", "get", "pods", "-l", "app="+app, "-o", "jsonpath={.items[0].metadata.name} {.items[0].status.podIP}")
	name, ip, _ = strings.Cut(strings.TrimSpace(out), " ")
	return name, ip
}

// checkHubbleUI drives the lab's Hubble UI in headless Chromium: the
// workloads of ui-shop are cards with edges, the denied connection's edge
// is red and names the policy, the table filtered to drops shows only
// drops, the why view names the denying rule, and the exporter's file of
// node (exportNode) replays. Screenshots go to the test's artifacts.
func checkHubbleUI(t *testing.T, lab *Lab, exportNode string) {
	browser.Require(t)
	// The relay and the UI may be starting again (on another node, after
	// the Hubble checks deleted one).
	lab.Kubectl("-n", "kube-system", "wait", "--for=condition=Available", "deployment/hubble-relay", "deployment/hubble-ui", "--timeout=3m")
	lab.KubectlApply(hubbleUIManifest)
	lab.Kubectl("-n", "ui-shop", "wait", "--for=condition=Available", "deployment", "--all", "--timeout=3m")
	client, _ := lab.uiPod("client")
	admin, adminIP := lab.uiPod("admin")
	call := func(to string) error {
		_, err := lab.run("kubectl", "-n", "ui-shop", "exec", client, "--", "/agnhost", "connect", to, "--timeout=3s")
		return err
	}
	lab.Eventually("the client reaches web through its Service", 2*time.Minute, func() error { return call("web:80") })
	for range 3 {
		if err := call("web:80"); err != nil {
			t.Fatalf("client to web: %v", err)
		}
	}
	lab.Eventually("the deny rule drops the client's connections to admin", time.Minute, func() error {
		if call(adminIP+":8080") == nil {
			return fmt.Errorf("admin answered the client")
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := browser.Launch(ctx, browser.Options{Width: 1400, Height: 900})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	page := browserPage{t: t, ctx: ctx, b: b}
	url := lab.hubbleUIURL() + "?namespace=ui-shop"
	testenv.Eventually(t, time.Minute, func() error {
		if err := b.Navigate(ctx, url); err != nil {
			out, _ := lab.run("kubectl", "-n", "kube-system", "get", "pods,endpointslices", "-l", "k8s-app=hubble-ui", "-o", "wide")
			log, _ := os.ReadFile(filepath.Join(lab.StateDir, "logs", "supervisor.log"))
			return fmt.Errorf("%w\n%s\nsupervisor log: %s", err, out, tail(string(log), 2000))
		}
		return nil
	})
	page.wait("cards for client, web's Service and Deployment, admin",
		`['client', 'web', 'admin'].every(n => [...document.querySelectorAll('#map .card')].some(c => c.dataset.title === n)) &&
		 document.querySelector('#map .card.service[data-title="web"]') !== null`)
	page.wait("the client's edge to web's Service, forwarded",
		`document.querySelector('.edge-group[data-from="app:client"][data-to="service:web"]')?.dataset.verdict === 'forwarded'`)
	drop := `document.querySelector('.edge-group[data-from="app:client"][data-to="app:admin"]')`
	page.wait("the edge to admin red, the deny policy named on the map",
		drop+`?.dataset.verdict === 'dropped' && `+drop+`.dataset.label.includes('denied by deny-client-to-admin')`)
	page.shot("hubble-ui-map.png")

	page.typeFilter("--verdict DROPPED")
	page.wait("the table shows drops only",
		`(r => r.length > 0 && r.every(x => x.dataset.verdict === 'DROPPED'))([...document.querySelectorAll('#table .rows .row')].filter(r => r.checkVisibility()))`)
	page.shot("hubble-ui-drops.png")

	page.eval(drop + `.dispatchEvent(new MouseEvent('click', {bubbles: true}))`)
	page.wait("the why view prefilled from the edge", fmt.Sprintf(`document.getElementById('why-src').value === 'ui-shop/%s' &&
		document.getElementById('why-dst').value === 'ui-shop/%s'`, client, admin))
	page.eval(`document.querySelector('#why-form button').click()`)
	page.wait("the agent's trace: denied by the rule",
		`document.querySelector('#why-result .verdict')?.dataset.allowed === 'false' &&
		 document.getElementById('why-result').textContent.includes('CiliumNetworkPolicy ui-shop/deny-client-to-admin')`)
	page.shot("hubble-ui-why.png")
	page.eval(`document.querySelector('#why-result .policy-link[data-name="deny-client-to-admin"]').click()`)
	page.wait("the policy's YAML from the API server", `document.querySelector('#panel-body pre.yaml')?.textContent.includes('ingressDeny')`)

	// Replay: the node's export file, downloaded and loaded into the page.
	out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, exportNode, "--", "cat", "/var/run/cilium/hubble/events.log")
	if err != nil {
		t.Fatalf("read the export file: %v", err)
	}
	file := filepath.Join(t.TempDir(), "events.log")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.SetFileInput(ctx, "#replay", file); err != nil {
		t.Fatal(err)
	}
	page.wait("the export file replayed into a map", `document.getElementById('status').textContent.includes('replay of events.log') &&
		document.querySelectorAll('#map .card').length > 1 && document.querySelectorAll('#map .edge-group').length > 0`)
	page.shot("hubble-ui-replay.png")
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// browserPage holds what the UI checks share.
type browserPage struct {
	t   *testing.T
	ctx context.Context
	b   *browser.Browser
}

func (p browserPage) wait(what, js string) {
	p.t.Helper()
	if err := p.b.WaitFor(p.ctx, js, time.Minute); err != nil {
		p.shot("failed.png")
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p browserPage) eval(js string) {
	p.t.Helper()
	var ignored any
	if err := p.b.Eval(p.ctx, "("+js+", true)", &ignored); err != nil {
		p.t.Fatal(err)
	}
}

func (p browserPage) typeFilter(text string) {
	p.t.Helper()
	p.eval(fmt.Sprintf(`(f => { f.value = %q; f.dispatchEvent(new Event('input')) })(document.getElementById('filter'))`, text))
}

// shot saves the page into the test's artifacts (go test -artifacts
// keeps them; make test-e2e-smoke puts them in .cache/test-artifacts).
func (p browserPage) shot(name string) {
	p.t.Helper()
	if err := p.b.Screenshot(p.ctx, filepath.Join(p.t.ArtifactDir(), name)); err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
	}
}
