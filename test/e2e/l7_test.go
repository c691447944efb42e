package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/testenv"
)

// l7Client is a pod with the host's tools (dig, curl) on one node.
const l7Client = `
apiVersion: v1
kind: Pod
metadata:
  name: l7client
  labels: {app: l7client}
spec:
  nodeName: %s
  containers:
    - name: tools
      image: busybox
      command: [sleep, "3600"]
`

// l7Policy lets the client ask cluster DNS for the lab's world names only
// (through the DNS proxy), and reach the world's target by name, for GET
// /allowed only (through the HTTP proxy).
const l7Policy = `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: l7
spec:
  endpointSelector:
    matchLabels: {app: l7client}
  egress:
    - toEndpoints:
        - matchLabels:
            k8s:io.kubernetes.pod.namespace: kube-system
            k8s:k8s-app: kube-dns
      toPorts:
        - ports: [{port: "53", protocol: ANY}]
          rules:
            dns: [{matchPattern: "*.cilium-lab.test"}]
    - toFQDNs: [{matchName: %s}]
      toPorts:
        - ports: [{port: "80", protocol: TCP}]
          rules:
            http: [{method: GET, path: "/allowed.*"}]
`

// l7LoopClient looks the target's name up (through cluster DNS, and so
// the DNS proxy) and sends GET /allowed on one kept-alive connection
// (through the HTTP proxy), every interval: a failed lookup, a wrong
// address or a request that does not get 200 ends it. Its host is
// name=address.
var l7LoopClient = loopClient(`
name, _, want = host.partition("=")
c = http.client.HTTPConnection(name, 80, timeout=2)
c.connect()
port = c.sock.getsockname()[1]
print("streaming from port", port, flush=True)
`, `
got = socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
if got != want:
    raise Exception("%s resolved to %s" % (name, got))
c.request("GET", "/allowed")
r = c.getresponse()
r.read()
if r.status != 200:
    raise Exception("status %d" % r.status)
`, false)

// worldAlias is the lab world's CNAME to its target's name
// (lab/internal/plan.WorldAliasName).
const worldAlias = "www.cilium-lab.test"

// worldHosts are the lab world's target and other names and addresses,
// from cilium-lab (the flags it gives cilium-cli's connectivity test).
func worldHosts(t *testing.T, lab *Lab) (target, targetIP, other, otherIP string) {
	t.Helper()
	out, err := lab.run("cilium-lab", "connectivity-test-flags", "--state-dir", lab.StateDir)
	if err != nil {
		t.Fatalf("world: %v\n%s", err, out)
	}
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "--external-target":
			target = strings.TrimSuffix(f[i+1], ".")
		case "--external-other-target":
			other = strings.TrimSuffix(f[i+1], ".")
		case "--external-ip":
			targetIP = f[i+1]
		case "--external-other-ip":
			otherIP = f[i+1]
		}
	}
	if target == "" || other == "" || targetIP == "" || otherIP == "" {
		t.Fatalf("world hosts not in %q", out)
	}
	return target, targetIP, other, otherIP
}

// checkL7 proves layer-7 policy through the proxy on the client's node:
// DNS rules answer names they allow and REFUSE others; toFQDNs lets the
// client reach the name it allows, at the address the answer gave, and
// not another name's; HTTP rules give 200 for the allowed method and path
// and 403 for the rest; the agent's FQDN cache shows what was learned.
// It returns the client's loop of lookups and requests, which the agent
// restart runs across (the proxy runs apart), and what removes the
// client and its policy.
func checkL7(t *testing.T, lab *Lab, node string) (restart flow, cleanup func()) {
	target, targetIP, other, _ := worldHosts(t, lab)
	lab.KubectlApply(fmt.Sprintf(l7Client, node))
	lab.Eventually("the l7 client Running", 2*time.Minute, func() error {
		if phase := lab.Kubectl("get", "pod", "l7client", "-o", "jsonpath={.status.phase}"); phase != "Running" {
			return fmt.Errorf("phase %s", phase)
		}
		return nil
	})
	lab.KubectlApply(fmt.Sprintf(l7Policy, target))
	exec := func(args ...string) (string, error) {
		return lab.run("kubectl", append([]string{"exec", "l7client", "--"}, args...)...)
	}
	code := func(url string) string {
		out, _ := exec("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", url)
		return strings.TrimSpace(out)
	}
	// A CNAME first, before the client ever asks for the target by its
	// own name: the world's DNS server (in the outside client, which
	// cluster DNS forwards the world's zones to) answers the alias with a
	// CNAME to the target and the target's address. The DNS rules would
	// let the client ask for the target, so the proxy learns the address
	// for it too, and toFQDNs for the target admits the connection.
	lab.Eventually("GET /allowed by the target's alias (a CNAME)", time.Minute, func() error {
		if c := code("http://" + worldAlias + "/allowed"); c != "200" {
			return fmt.Errorf("GET http://%s/allowed: %q", worldAlias, c)
		}
		return nil
	})
	if out, err := exec("dig", "+time=2", "+tries=1", worldAlias); err != nil || !strings.Contains(out, "CNAME\t"+target+".") {
		t.Errorf("dig %s: %v, want a CNAME to %s\n%s", worldAlias, err, target, out)
	}
	lab.Eventually("the allowed name resolves through the DNS proxy", time.Minute, func() error {
		out, err := exec("dig", "+short", "+time=2", "+tries=1", target)
		if err != nil {
			return fmt.Errorf("dig %s: %w", target, err)
		}
		if strings.TrimSpace(out) != targetIP {
			return fmt.Errorf("dig %s: %q, want %s", target, out, targetIP)
		}
		return nil
	})
	if out, _ := exec("dig", "+time=2", "+tries=1", "kubernetes.default.svc.cluster.local"); !strings.Contains(out, "status: REFUSED") {
		t.Errorf("a name the DNS rules do not allow: %s, want REFUSED", out)
	}
	lab.Eventually("GET /allowed through the HTTP proxy", time.Minute, func() error {
		if c := code("http://" + target + "/allowed"); c != "200" {
			return fmt.Errorf("GET /allowed: %q", c)
		}
		return nil
	})
	if c := code("http://" + target + "/denied"); c != "403" {
		t.Errorf("GET /denied: %q, want 403", c)
	}
	if out, err := exec("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "--max-time", "5", "http://"+target+"/allowed"); strings.TrimSpace(out) != "403" {
		t.Errorf("POST /allowed: %q %v, want 403", out, err)
	}
	// The other name resolves (the DNS rules allow it) but toFQDNs does
	// not select its address.
	if c := code("http://" + other + "/allowed"); c == "200" || c == "403" {
		t.Errorf("GET %s: %q, want no connection", other, c)
	}
	out, err := lab.dbg(node, "fqdn", "cache", "list")
	if err != nil || !strings.Contains(out, target+".") || !strings.Contains(out, worldAlias+".") || !strings.Contains(out, targetIP) {
		t.Errorf("cilium-dbg fqdn cache list: %v\n%s", err, out)
	}
	checkL7Flows(t, lab, node, target)
	t.Logf("layer 7 on %s: %s, a CNAME to %s, admitted by toFQDNs for its target; %s resolved to %s through the DNS proxy, another name REFUSED; "+
		"GET /allowed 200, GET /denied and POST 403 through the HTTP proxy; %s (allowed by the DNS rules, not by toFQDNs) unreachable; "+
		"the FQDN cache has both names", node, worldAlias, target, target, targetIP, other)
	return flow{from: "l7client", to: target + "=" + targetIP, script: l7LoopClient}, func() {
		lab.Kubectl("delete", "ciliumnetworkpolicy", "l7", "--wait=true")
		lab.Kubectl("delete", "pod", "l7client", "--wait=true")
	}
}

// upstreamExample is the path of a file of Cilium's examples, unchanged:
// from the github.com/cilium/cilium module this module requires (its
// API schemas), which the Go module cache holds.
func upstreamExample(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cilium/cilium").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("the cilium module's directory: %v %s", err, out)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "examples", name)
}

// checkStarWars runs Cilium's getting-started demo as its guide does,
// with its files unchanged: the deathstar's layer-7 ingress policy lets
// the tiefighter land (POST /v1/request-landing) and denies it the
// exhaust port (PUT, 403 Access denied, from the HTTP proxy on the
// deathstar's node); the xwing, outside org=empire, cannot connect. The
// deathstar's two replicas are reached through its Service from the
// tiefighter's node and from another.
func checkStarWars(t *testing.T, lab *Lab) {
	app, policy := upstreamExample(t, "minikube/http-sw-app.yaml"), upstreamExample(t, "minikube/sw_l3_l4_l7_policy.yaml")
	if out, err := lab.run("kubectl", "apply", "-f", app); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", app, err, out)
	}
	defer lab.run("kubectl", "delete", "-f", app, "--wait=true")
	lab.Eventually("the deathstar and its ships Running", 2*time.Minute, func() error {
		out := lab.Kubectl("get", "pods", "-l", "org in (empire,alliance)", "-o", "jsonpath={range .items[*]}{.status.phase} {end}")
		if phases := strings.Fields(out); len(phases) != 4 || slices.ContainsFunc(phases, func(p string) bool { return p != "Running" }) {
			return fmt.Errorf("phases %q", phases)
		}
		return nil
	})
	if out, err := lab.run("kubectl", "apply", "-f", policy); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", policy, err, out)
	}
	defer lab.run("kubectl", "delete", "-f", policy, "--wait=true")
	curl := func(ship, method, path string) (string, error) {
		return lab.run("kubectl", "exec", ship, "--", "curl", "-s", "--max-time", "3", "-X"+method, "deathstar.default.svc.cluster.local"+path)
	}
	lab.Eventually("the tiefighter lands through the HTTP proxy", time.Minute, func() error {
		if out, err := curl("tiefighter", "PUT", "/v1/exhaust-port"); err != nil || out != "Access denied\r\n" {
			return fmt.Errorf("PUT /v1/exhaust-port: %q, want Access denied (%v)", out, err) //nolint:errorlint // err may be nil: shown, not wrapped
		}
		return nil
	})
	// Both replicas: ClusterIP picks one for each connection.
	for range 6 {
		if out, err := curl("tiefighter", "POST", "/v1/request-landing"); err != nil || out != "Ship landed\n" {
			t.Fatalf("tiefighter POST /v1/request-landing: %q %v", out, err)
		}
		if out, _ := curl("tiefighter", "PUT", "/v1/exhaust-port"); out != "Access denied\r\n" {
			t.Fatalf("tiefighter PUT /v1/exhaust-port: %q, want Access denied", out)
		}
	}
	if out, err := curl("xwing", "POST", "/v1/request-landing"); err == nil {
		t.Fatalf("xwing POST /v1/request-landing: %q, want no connection", out)
	}
	t.Logf("star wars: the tiefighter lands and is denied the exhaust port; the xwing cannot connect")
}

// checkL7Flows asks the node's Hubble for the client's layer-7 flows with
// Cilium's hubble CLI and with ours, by the layer-7 filters: the DNS
// query and answer for the target, the denied POST's request and its 403,
// and the client's flows to the target by its names (toFQDNs learned them).
func checkL7Flows(t *testing.T, lab *Lab, node, target string) {
	socket := hubbleServer{name: "socket of " + node, node: node, flags: []string{"--server", "unix:///var/run/cilium/hubble.sock"}}
	last := []string{"observe", "--last", "5000", "-o", "json"}
	for _, cli := range []struct{ name, bin string }{{"upstream hubble", upstreamHubble(t)}, {"our hubble", filepath.Join(*binDir, "hubble")}} {
		for _, c := range []struct {
			args []string
			want []string
		}{
			// Responses come from the server: --pod names either side.
			{[]string{"--pod", "default/l7client", "--type", "l7", "--protocol", "dns"},
				[]string{`"query":"` + target + `."`, `"type":"REQUEST"`, `"type":"RESPONSE"`}},
			{[]string{"--pod", "default/l7client", "--type", "l7", "--http-status", "403", "--http-method", "POST"},
				[]string{`"code":403`, `"method":"POST"`}},
			{[]string{"--from-pod", "default/l7client", "--type", "l7", "--http-path", "/denied"}, []string{`"verdict":"DROPPED"`, `/denied`}},
			// Both names of the address, sorted: the alias (a CNAME to the
			// target) was asked for first.
			{[]string{"--from-pod", "default/l7client", "--to-fqdn", target}, []string{`"destination_names":["` + target + `","` + worldAlias + `"]`}},
		} {
			args := append(append([]string(nil), last...), c.args...)
			testenv.Eventually(t, time.Minute, func() error {
				out, err := lab.hubbleCLI(cli.bin, socket, 20*time.Second, args...)
				if err != nil && !strings.Contains(err.Error(), "exit status 124") {
					return fmt.Errorf("%s %s: %w\n%s", cli.name, strings.Join(args, " "), err, out)
				}
				for _, w := range c.want {
					if !strings.Contains(out, w) {
						return fmt.Errorf("%s %s shows no %s:\n%s", cli.name, strings.Join(args, " "), w, out)
					}
				}
				return nil
			})
		}
	}
}
