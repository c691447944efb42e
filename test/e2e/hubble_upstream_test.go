package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/testenv"
)

// upstreamHubble is Cilium's own hubble CLI (make build-hubble-upstream).
func upstreamHubble(t *testing.T) string {
	t.Helper()
	p := filepath.Join(*binDir, "upstream", "hubble")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run make build-hubble-upstream", p)
	}
	return p
}

// hubbleUpstreamManifest: echo pods on both nodes, and a pod that
// refuses every connection by policy, for dropped flows.
const hubbleUpstreamManifest = smokeManifest + `---
apiVersion: v1
kind: Pod
metadata:
  name: locked
  namespace: default
  labels: {app: locked}
spec:
  containers:
  - name: locked
    image: ` + agnhost + `
    args: ["netexec", "--http-port=8080"]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: locked
  namespace: default
spec:
  podSelector:
    matchLabels: {app: locked}
  policyTypes: [Ingress]
`

// hubbleServer is where the hubble CLI asks: the node it runs on and the
// flags that name the server.
type hubbleServer struct {
	name  string
	node  string
	flags []string
}

// hubbleServers are a node's socket and the relay (mutual TLS), as a user
// reaches them: this one function knows the addresses. The relay is
// named by its Service's address (relayFlags): upstream hubble resolves a
// name with gRPC's DNS resolver, whose lookups wait for the lab nodes'
// unreachable name server (10s for "localhost").
func hubbleServers(l *Lab, node string) []hubbleServer {
	return []hubbleServer{
		{name: "socket of " + node, node: node, flags: []string{"--server", "unix:///var/run/cilium/hubble.sock"}},
		{name: "relay", node: l.Name + "-node1", flags: l.relayFlags()},
	}
}

// upstream runs the upstream hubble CLI on s's node with s's flags
// after args, for at most timeout (a stream that follows is cut then, and
// what it printed is the answer).
func (l *Lab) upstream(s hubbleServer, timeout time.Duration, args ...string) (string, error) {
	return l.hubbleCLI(upstreamHubble(l.t), s, timeout, args...)
}

// hubbleCLI is upstream with another hubble CLI, the binary at bin.
func (l *Lab) hubbleCLI(bin string, s hubbleServer, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	argv := []string{"exec", "--state-dir", l.StateDir, s.node, "--", "timeout", fmt.Sprint(int(timeout.Seconds())),
		bin}
	argv = append(append(argv, args...), s.flags...)
	cmd := exec.CommandContext(ctx, filepath.Join(*binDir, "cilium-lab"), argv...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+l.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPrivilegedSmokeHubbleUpstream: Cilium's hubble CLI, unchanged,
// against a node's socket and through the relay: status (the gRPC health
// service), observe in every output (field masks), filters, the time
// window, nodes, namespaces, through a port-forward to the relay in
// plaintext, peers, agent and debug events, and the exporter's file read
// back with --input-file; then Hubble UI in a browser (checkHubbleUI).
func TestPrivilegedSmokeHubbleUpstream(t *testing.T) {
	upstreamHubble(t)
	lab := StartLab(t, "hubup", "--nodes", "2", "--cni=cilium", "--hubble-export")
	lab.KubectlApply(hubbleUpstreamManifest)
	pods := echoPods(lab, 4)
	var locked struct {
		Spec   struct{ NodeName string }
		Status struct{ PodIP, Phase string }
	}
	lab.Eventually("the locked pod runs", 2*time.Minute, func() error {
		out, err := lab.run("kubectl", "get", "pod", "locked", "-o", "json")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &locked); err != nil {
			return err
		}
		if locked.Status.Phase != "Running" || locked.Status.PodIP == "" {
			return fmt.Errorf("phase %s", locked.Status.Phase)
		}
		return nil
	})
	// The client is on the locked pod's node, whose socket then sees
	// every flow of the test: to echo pods on both nodes, and the drops.
	node := locked.Spec.NodeName
	client := onNode(pods, node)[0]
	for _, to := range pods {
		if to != client {
			lab.connect(client.name, to.ip+":8080")
		}
	}
	// Each server's checks ask for the locked pod's drops: they are made
	// again before them, as a node's ring of flows soon lets old ones go.
	dropAtLocked := func() {
		t.Helper()
		if out, err := lab.run("kubectl", "exec", client.name, "--", "/agnhost", "connect", locked.Status.PodIP+":8080", "--timeout=2s"); err == nil {
			t.Fatalf("the locked pod answered: %s", out)
		}
	}
	dropAtLocked()
	clientPod := "default/" + client.name

	for _, s := range hubbleServers(lab, node) {
		t.Run(s.name, func(t *testing.T) {
			check := func(what string, timeout time.Duration, args []string, want ...string) string {
				t.Helper()
				var out string
				testenv.Eventually(t, time.Minute, func() error {
					var err error
					out, err = lab.upstream(s, timeout, args...)
					if err != nil && !strings.Contains(err.Error(), "exit status 124") {
						return fmt.Errorf("%s: hubble %s: %w\n%s", what, strings.Join(args, " "), err, out)
					}
					for _, w := range want {
						if !strings.Contains(out, w) {
							return fmt.Errorf("%s: hubble %s shows no %q:\n%s", what, strings.Join(args, " "), w, out)
						}
					}
					return nil
				})
				return out
			}
			check("status", 20*time.Second, []string{"status"}, "Healthcheck (via", ": Ok", "Current/Max Flows")
			// The default output is compact, with the CLI's field mask;
			// table and dict send it too; json asks for whole flows.
			last := []string{"observe", "--last", "1000", "--pod", clientPod}
			check("compact", 20*time.Second, last, client.name, "FORWARDED", "-> default/")
			check("table", 20*time.Second, append(last, "-o", "table"), "SOURCE", "DESTINATION", "VERDICT", client.name, "FORWARDED")
			check("dict", 20*time.Second, append(last, "-o", "dict"), "SOURCE: "+clientPod, "VERDICT: FORWARDED")
			out := check("json", 20*time.Second, append(last, "-o", "json"), `"verdict":"FORWARDED"`, client.name)
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var v map[string]any
				if err := json.Unmarshal([]byte(line), &v); err != nil {
					t.Errorf("json output line %q: %v", line, err)
				}
			}
			// A mask of the user's: only its fields come.
			out = check("field mask", 20*time.Second, append(last, "-o", "json", "--field-mask", "time,verdict,source.pod_name"),
				`"pod_name":"`+client.name)
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var r struct{ Flow map[string]any }
				if err := json.Unmarshal([]byte(line), &r); err != nil || r.Flow == nil {
					continue
				}
				for k := range r.Flow {
					if k != "time" && k != "verdict" && k != "source" {
						t.Errorf("masked flow has %s: %s", k, line)
					}
				}
			}
			// (The CLI checks a mask before it asks; the servers' own check is
			// pkg/hubble/fieldmask's and the observer's tests.)
			if out, err := lab.upstream(s, 20*time.Second, append(last, "-o", "json", "--field-mask", "time,source.pod")...); err == nil ||
				!strings.Contains(out, "source.pod") {
				t.Errorf("a mask with source.pod: %v: %s", err, out)
			}
			// Filters.
			check("dropped", 20*time.Second, []string{"observe", "--last", "100", "--verdict", "DROPPED", "--to-pod", "default/locked"},
				"default/locked:8080", "DROPPED")
			out = check("tcp to 8080", 20*time.Second, []string{"observe", "--last", "100", "--protocol", "tcp", "--to-port", "8080",
				"--from-pod", clientPod, "-o", "dict"}, "DESTINATION:")
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "DESTINATION:") && !strings.HasSuffix(line, ":8080") {
					t.Errorf("--to-port 8080 shows %q", line)
				}
			}
			// Every other filter flag answers; those the test's flows carry
			// find them.
			dropAtLocked()
			type filterCase struct {
				args []string
				want string // in the answer; empty: it answers
			}
			fc := func(want string, args ...string) filterCase { return filterCase{args, want} }
			for _, f := range []filterCase{
				fc(client.name, "--namespace", "default"), fc(client.name, "--from-namespace", "default"),
				fc(client.name, "--to-namespace", "default"), fc(client.name, "-A"), fc(client.name, "--from-all-namespaces"),
				fc(client.name, "--to-all-namespaces"), fc(client.name, "--ip", client.ip), fc(client.name, "--from-ip", client.ip),
				fc(client.name, "--to-ip", client.ip), fc(client.name, "--label", "app=echo"), fc(client.name, "--from-label", "k8s:app=echo"),
				fc("default/locked", "--to-label", "app=locked"), fc(client.name, "--port", "8080"), fc(client.name, "--from-port", "8080"),
				fc(client.name, "--tcp-flags", "syn"), fc("default/locked", "--traffic-direction", "ingress"),
				fc("to-endpoint", "--type", "trace:to-endpoint"), fc("policy-verdict", "--type", "policy-verdict"),
				fc("DROPPED", "--type", "drop"), fc(client.name, "--node-name", node), fc("default/locked", "--drop-reason-desc", "POLICY_DENIED"),
				fc(client.name, "-4"), fc(client.name, "--ip-version", "v4"), fc(client.name, "--reply"), fc(client.name, "--not-reply"),
				fc("FORWARDED", "--not", "--verdict", "DROPPED"), fc("", "-6"), fc("", "--identity", "1"), fc("", "--from-identity", "1"),
				fc("", "--to-identity", "1"), fc("", "--uuid", "00000000-0000-0000-0000-000000000000"), fc("", "--interface", "lxc0"),
				fc("", "--workload", "Deployment/echo"), fc("", "--from-workload", "echo"), fc("", "--to-workload", "echo"),
				fc("", "--service", "default/echo"), fc("", "--from-service", "echo"), fc("", "--to-service", "default/echo"),
				fc("", "--snat-ip", "10.0.0.0/8"), fc("", "--http-status", "5+"), fc("", "--http-method", "get"),
				fc("", "--http-path", "/api/.*"), fc("", "--http-url", ".*"), fc("", "--http-header", "user-agent:curl"),
				fc("", "--protocol", "http"), fc("", "--protocol", "dns"), fc("", "--fqdn", "*.cilium.io"), fc("", "--from-fqdn", "cilium.io"),
				fc("", "--to-fqdn", "*.example.com"), fc(client.name, "--cluster", "default"), fc(client.name, "--from-cluster", "default"),
				fc(client.name, "--to-cluster", "default"), fc("", "--node-label", "kubernetes.io/os=linux"), fc("", "--trace-id", "4bf92f3577b34da6"),
				fc("", "--ip-trace-id", "7"), fc("", "--encrypted"), fc(client.name, "--unencrypted"),
				fc("default/locked", "--cel-expression", `_flow.verdict == Verdict.DROPPED && _flow.destination.pod_name == "locked"`),
			} {
				var want []string
				if f.want != "" {
					want = []string{f.want}
				}
				check("filter "+strings.Join(f.args, " "), 20*time.Second, append([]string{"observe", "--last", "1000"}, f.args...), want...)
			}
			// The window: --last and --first bound the count, --since the time.
			for _, args := range [][]string{{"--last", "3"}, {"--first", "3"}} {
				out := check(args[0], 20*time.Second, append([]string{"observe", "-o", "json"}, args...), `"flow"`)
				if n := strings.Count(out, `"flow":`); n != 3 {
					t.Errorf("observe %v: %d flows, want 3:\n%s", args, n, out)
				}
			}
			check("since", 20*time.Second, []string{"observe", "--since", "10m", "--pod", clientPod}, client.name)
			check("until", 20*time.Second, []string{"observe", "--since", "1h", "--until", "1s", "--pod", clientPod}, client.name)
			out = check("until, a window past", 20*time.Second, []string{"observe", "--until", "2000-01-01T00:00:00Z", "-o", "json"})
			if strings.Contains(out, `"flow":`) {
				t.Errorf("flows from before 2000: %s", out)
			}
			out = check("since, a window to come", 20*time.Second, []string{"observe", "--since", "2030-01-01T00:00:00Z", "-o", "json"})
			if strings.Contains(out, `"flow":`) {
				t.Errorf("flows from the future: %s", out)
			}
			// Followed: new connections show up while it runs.
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Second):
					}
					podConnect(lab, client.ip, pods[0].ip+":8080")
				}
			}()
			check("follow", 10*time.Second, []string{"observe", "--follow", "--pod", clientPod}, client.name)
			close(stop)
			<-done

			nodes := []string{node}
			if s.name == "relay" {
				nodes = []string{lab.Name + "-node1", lab.Name + "-node2"}
			}
			check("list nodes", 20*time.Second, []string{"list", "nodes"}, append(nodes, "Connected")...)
			check("list namespaces", 20*time.Second, []string{"list", "namespaces"}, "default")
			check("agent events", 20*time.Second, []string{"observe", "agent-events", "--last", "100", "-o", "json"},
				"AGENT_STARTED", "ENDPOINT_CREATED")
			check("debug events", 20*time.Second, []string{"observe", "debug-events", "--last", "10"})
		})
	}

	t.Run("port-forward", func(t *testing.T) { relayPortForward(t, lab, node) })

	// Peers come from a node's Peer service (the relay serves none),
	// with the addresses where the relay reaches them; a node whose Node
	// object goes is told gone.
	socket := hubbleServers(lab, node)[0]
	var ips nodeAddrList
	lab.KubectlJSON(&ips, "get", "nodes")
	var want []string
	other := ""
	for n, ip := range ips.internalIPs() {
		want = append(want, "PEER_ADDED   "+ip+":4244 "+n)
		if n != node {
			other = n
		}
	}
	watched := make(chan string, 1)
	go func() {
		out, err := lab.upstream(socket, 15*time.Second, "watch", "peers")
		if err != nil && !strings.Contains(err.Error(), "exit status 124") {
			out += "\n" + err.Error()
		}
		watched <- out
	}()
	time.Sleep(5 * time.Second) // the watch has listed the peers
	lab.Kubectl("delete", "node", other, "--wait=false")
	out := <-watched
	for _, w := range append(want, "PEER_DELETED "+ips.internalIPs()[other]+":4244 "+other) {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(w), " ")) {
			t.Errorf("hubble watch peers shows no %q:\n%s", w, out)
		}
	}

	// The exporter's file reads back with --input-file, filters and all.
	out, err := lab.upstream(hubbleServer{node: node}, 20*time.Second, "observe", "--input-file", "/var/run/cilium/hubble/events.log",
		"--pod", clientPod, "--verdict", "FORWARDED")
	if err != nil || !strings.Contains(out, client.name) || !strings.Contains(out, "FORWARDED") {
		t.Errorf("hubble observe --input-file: %v\n%s", err, out)
	}

	// The same lab, in a browser: Hubble UI.
	checkHubbleUI(t, lab, node)
}

// relayPortForward is `cilium hubble port-forward` and `hubble observe`
// as a user runs them on their machine: kubectl port-forward to the first
// port of the hubble-relay Service, then the upstream CLI in plaintext on
// localhost (the relay's loopback listener, which the port-forward
// reaches in the pod). The relay's pod IP serves no plaintext to a node.
func relayPortForward(t *testing.T, lab *Lab, node string) {
	var svc struct {
		Spec struct{ Ports []struct{ Port int } }
	}
	lab.KubectlJSON(&svc, "-n", "kube-system", "get", "service", "hubble-relay")
	if len(svc.Spec.Ports) == 0 {
		t.Fatal("the hubble-relay Service has no port")
	}
	local := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	fwd := exec.CommandContext(ctx, filepath.Join(*binDir, "kubectl"), "-n", "kube-system", "port-forward", "--address", "127.0.0.1",
		"svc/hubble-relay", fmt.Sprintf("%d:%d", local, svc.Spec.Ports[0].Port))
	fwd.Env = append(os.Environ(), "KUBECONFIG="+lab.Kubeconfig)
	var fwdOut strings.Builder
	fwd.Stdout, fwd.Stderr = &fwdOut, &fwdOut
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		fwd.Wait()
		t.Logf("kubectl port-forward:\n%s", fwdOut.String())
	})
	hubble := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, upstreamHubble(t), append(args, "--server", fmt.Sprintf("localhost:%d", local))...).CombinedOutput()
		return string(out), err
	}
	testenv.Eventually(t, time.Minute, func() error {
		out, err := hubble("status")
		if err != nil || !strings.Contains(out, "Healthcheck (via") || !strings.Contains(out, ": Ok") {
			return fmt.Errorf("hubble status through the port-forward: %v\n%s", err, out) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
	out, err := hubble("observe", "--last", "5", "-o", "json")
	if n := strings.Count(out, `"flow":`); err != nil || n == 0 {
		t.Errorf("hubble observe --last 5 through the port-forward: %d flows, %v\n%s", n, err, out)
	}

	podIP := strings.TrimSpace(lab.Kubectl("-n", "kube-system", "get", "pod", "-l", "k8s-app=hubble-relay",
		"-o", "jsonpath={.items[0].status.podIP}"))
	out, err = lab.upstream(hubbleServer{node: node, flags: []string{"--server", net.JoinHostPort(podIP, "4245")}}, 15*time.Second, "status")
	if err == nil || strings.Contains(out, ": Ok") {
		t.Errorf("hubble status in plaintext to the relay's pod IP from %s: %v\n%s", node, err, out)
	}
}
