package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeL7Policy is the policy of the README's layer-7 section that a user
// pastes: the yaml block after its marker, as it is.
func readmeL7Policy(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const marker, open, end = "<!-- readme-l7-policy:", "\n```yaml\n", "\n```\n"
	_, rest, ok := strings.Cut(string(b), marker)
	if ok {
		_, rest, ok = strings.Cut(rest, open)
	}
	block, _, closed := strings.Cut(rest, end)
	if !ok || !closed {
		t.Fatalf("README.md has no yaml block after %q", marker)
	}
	return block + "\n"
}

// The README's block is found, whole: the test below applies what a
// user copies.
func TestReadmeL7Policy(t *testing.T) {
	p := readmeL7Policy(t)
	for _, want := range []string{"kind: CiliumNetworkPolicy", "toFQDNs:", "matchName: api.github.com", "dns:", `matchPattern: "*"`} {
		if !strings.Contains(p, want) {
			t.Errorf("README policy has no %q:\n%s", want, p)
		}
	}
}

// checkKubernetesDNS runs Cilium's DNS-based policy guide as it is
// written, its files unchanged: the mediabot pod, then dns-matchname.yaml
// (api.github.com reachable, support.github.com not), dns-pattern.yaml
// (*.github.com: both, over HTTPS and HTTP; github.com not) and
// dns-port.yaml (443 only), and last the README's policy. The names
// resolve in cluster DNS to the lab's world, which serves them; the
// guide's curl -I -s is ours with the lab CA, the only change.
func checkKubernetesDNS(t *testing.T, lab *Lab) {
	app := upstreamExample(t, "kubernetes-dns/dns-sw-app.yaml")
	apply := func(file string) {
		t.Helper()
		if out, err := lab.run("kubectl", "apply", "-f", file); err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, err, out)
		}
	}
	apply(app)
	defer lab.run("kubectl", "delete", "-f", app, "--wait=true")
	if out, err := lab.run("kubectl", "wait", "pod/mediabot", "--for=condition=Ready", "--timeout=2m"); err != nil {
		t.Fatalf("kubectl wait pod/mediabot: %v\n%s", err, out)
	}
	ca, err := os.ReadFile(filepath.Join(lab.StateDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	const caFile = "/tmp/lab-ca.crt"
	if out, err := lab.run("kubectl", "exec", "mediabot", "--", "sh", "-c", `mkdir -p /tmp && printf %s "$1" >`+caFile, "sh", string(ca)); err != nil {
		t.Fatalf("the lab CA into mediabot: %v\n%s", err, out)
	}
	// reach is the guide's `curl -I -s [--max-time 5] URL | head -1`:
	// the status line, or curl's exit code.
	reach := func(url string) (status string, exit int) {
		out, err := lab.run("kubectl", "exec", "mediabot", "--", "curl", "-I", "-s", "--max-time", "3", "--cacert", caFile, url)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", ee.ExitCode()
		}
		line, _, _ := strings.Cut(out, "\n")
		return strings.TrimSpace(line), 0
	}
	reachable := func(url string) func() error {
		return func() error {
			if status, exit := reach(url); exit != 0 || !strings.HasPrefix(status, "HTTP/") || !strings.Contains(status, " 200") {
				return fmt.Errorf("curl -I %s: %q, exit code %d, want 200", url, status, exit)
			}
			return nil
		}
	}
	// Dropped, as the guide shows: curl times out (28), having resolved
	// the name (a failed lookup is 6).
	dropped := func(url string) func() error {
		return func() error {
			if status, exit := reach(url); exit != 28 {
				return fmt.Errorf("curl -I %s: %q, exit code %d, want 28 (timed out)", url, status, exit)
			}
			return nil
		}
	}
	must := func(what string, fn func() error) {
		t.Helper()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	const wait = time.Minute
	defer lab.run("kubectl", "delete", "cnp", "fqdn", "--ignore-not-found", "--wait=true")

	apply(upstreamExample(t, "kubernetes-dns/dns-matchname.yaml"))
	// The policy is in force once support.github.com is dropped.
	lab.Eventually("dns-matchname.yaml: support.github.com dropped", wait, dropped("https://support.github.com"))
	lab.Eventually("dns-matchname.yaml: api.github.com reachable", wait, reachable("https://api.github.com"))

	apply(upstreamExample(t, "kubernetes-dns/dns-pattern.yaml"))
	lab.Eventually("dns-pattern.yaml: support.github.com reachable", wait, reachable("https://support.github.com"))
	must("dns-pattern.yaml: api.github.com", reachable("https://api.github.com"))
	must("dns-pattern.yaml: support.github.com on port 80", reachable("http://support.github.com"))
	must("dns-pattern.yaml: github.com, which *.github.com does not match", dropped("https://github.com"))

	apply(upstreamExample(t, "kubernetes-dns/dns-port.yaml"))
	lab.Eventually("dns-port.yaml: support.github.com on port 80 dropped", wait, dropped("http://support.github.com"))
	must("dns-port.yaml: support.github.com on port 443", reachable("https://support.github.com"))
	lab.Kubectl("delete", "cnp", "fqdn", "--wait=true")

	lab.KubectlApply(readmeL7Policy(t))
	defer lab.run("kubectl", "delete", "cnp", "mediabot-to-github", "--ignore-not-found", "--wait=true")
	lab.Eventually("the README's policy: api.github.com on port 80 dropped", wait, dropped("http://api.github.com"))
	must("the README's policy: api.github.com on port 443", reachable("https://api.github.com"))
	node := strings.TrimSpace(lab.Kubectl("get", "pod", "mediabot", "-o", "jsonpath={.spec.nodeName}"))
	if out, err := lab.dbg(node, "fqdn", "cache", "list"); err != nil || !strings.Contains(out, "api.github.com.") {
		t.Errorf("cilium-dbg fqdn cache list on %s: %v\n%s", node, err, out)
	}
	t.Logf("Cilium's DNS guide: dns-matchname.yaml, dns-pattern.yaml and dns-port.yaml allow and drop as it shows; the README's policy too")
}
