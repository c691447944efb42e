package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// TestPrivilegedSmokeCilium is cilium-go networking a two-node lab in tunnel mode,
// balancing Services itself: the lab runs no kube-proxy.
func TestPrivilegedSmokeCilium(t *testing.T) { testCiliumLab(t, "e2ecil", "tunnel", "none", true) }

// TestPrivilegedSmokeCiliumNative is the same in native routing mode, beside
// kube-proxy (iptables), as before the kube-proxy replacement. With -short
// (make test) it stops after the agent restart: pod replacement and
// operator failover do not depend on the routing mode, and the tunnel
// smoke covers them; make e2e runs it whole.
func TestPrivilegedSmokeCiliumNative(t *testing.T) {
	testCiliumLab(t, "e2ecn", "native", "iptables", !testing.Short())
}

type echoPod struct{ name, node, ip string }

func testCiliumLab(t *testing.T, name, mode, kubeProxy string, full bool) {
	lab := StartLab(t, name, "--nodes", "2", "--cni=cilium", "--routing-mode="+mode, "--kube-proxy="+kubeProxy,
		"--zones", strings.Join(labZones, ","))
	node1, node2 := name+"-node1", name+"-node2"

	cidrs := ciliumNodeCIDRs(lab)
	if len(cidrs) != 2 || cidrs[node1] == "" || cidrs[node2] == "" || cidrs[node1] == cidrs[node2] {
		t.Fatalf("CiliumNode pod CIDRs %v: want a distinct one for each node", cidrs)
	}

	lab.KubectlApply(smokeManifest)
	pods := echoPods(lab, 4)
	for _, p := range pods {
		if !inPrefix(cidrs[p.node], p.ip) {
			t.Errorf("pod %s on %s has %s, outside the node's pod CIDR %s", p.name, p.node, p.ip, cidrs[p.node])
		}
	}
	for _, from := range pods {
		for _, to := range pods {
			if from != to {
				lab.connect(from.name, to.ip+":8080")
			}
		}
	}
	client := onNode(pods, node1)[0]
	var l7flow flow
	if kubeProxy == "none" {
		checkServices(t, lab, client, node1, node2)
		checkTopology(t, lab, client, node1, node2)
		var l7cleanup func()
		l7flow, l7cleanup = checkL7(t, lab, node1)
		defer l7cleanup()
		checkStarWars(t, lab)
		// Before the restart: its time lets the name cache's first
		// entries expire, which the restarted agent must keep for the
		// layer-7 loop's connection.
		checkKubernetesDNS(t, lab)
		if full {
			hugeServiceRefusedAlone(t, lab, client)
		}
	} else {
		lab.Eventually("the Service answers through kube-proxy", time.Minute, func() error {
			_, err := lab.run("kubectl", "exec", client.name, "--", "/agnhost", "connect", "echo:80", "--timeout=3s")
			return err
		})
		lab.connect(client.name, "echo.default.svc.cluster.local:80")
	}

	checkEndpointsAndIdentity(t, lab, pods)
	server := onNode(pods, node2)[0]
	if kubeProxy == "none" {
		// Through the Service too, and a Service made while the agent
		// is away works once it is back.
		echoIP := strings.TrimSpace(lab.Kubectl("get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}"))
		var nodes nodeAddrList
		lab.KubectlJSON(&nodes, "get", "nodes")
		agentRestartKeepsTCP(t, lab, node1, client.ip, func() { lab.KubectlApply(lateService) },
			flow{from: client.name, to: server.ip}, flow{from: client.name, to: echoIP + ":80"},
			flow{from: outsideClient, to: nodes.internalIPs()[node1] + ":30080"}, l7flow)
		lab.connect(client.name, "late.default.svc.cluster.local:80")
	} else {
		agentRestartKeepsTCP(t, lab, node1, client.ip, nil, flow{from: client.name, to: server.ip})
	}
	if !full {
		return
	}

	// A pod created after the restart, on the restarted node, and the
	// deletion of the one it replaces.
	gone := onNode(pods, node1)[1]
	lab.Kubectl("delete", "pod", gone.name, "--wait=true")
	pods = echoPods(lab, 4)
	fresh := onNode(pods, node1)
	for _, p := range fresh {
		lab.connect(p.name, server.ip+":8080")
		lab.connect(server.name, p.ip+":8080")
	}
	checkGone(t, lab, gone, node1, node2)

	operatorFailoverKeepsIPAM(t, lab, cidrs)
}

// connect makes one TCP connection from a pod and fails the test if it
// does not succeed.
func (l *Lab) connect(from, target string) {
	l.t.Helper()
	out, err := l.run("kubectl", "exec", from, "--", "/agnhost", "connect", target, "--timeout=5s")
	if err != nil {
		l.t.Errorf("%s -> %s: %v\n%s", from, target, err, out)
	}
}

// echoPods waits for n Ready echo pods spread on both nodes.
func echoPods(lab *Lab, n int) []echoPod {
	lab.t.Helper()
	var out []echoPod
	lab.Eventually(fmt.Sprintf("%d echo pods Running and Ready on both nodes", n), 3*time.Minute, func() error {
		var pods podList
		lab.KubectlJSON(&pods, "get", "pods", "-l", "app=echo")
		out = out[:0]
		nodes := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase != "Running" || !conditionTrue(p.Status.Conditions, "Ready") || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s is %s", p.Metadata.Name, p.Status.Phase)
			}
			out = append(out, echoPod{p.Metadata.Name, p.Spec.NodeName, p.Status.PodIP})
			nodes[p.Spec.NodeName] = true
		}
		if len(out) != n || len(nodes) != 2 {
			return fmt.Errorf("%d pods on %d nodes", len(out), len(nodes))
		}
		return nil
	})
	return out
}

func onNode(pods []echoPod, node string) []echoPod {
	var out []echoPod
	for _, p := range pods {
		if p.node == node {
			out = append(out, p)
		}
	}
	return out
}

func ciliumNodeCIDRs(lab *Lab) map[string]string {
	var list v2.CiliumNodeList
	lab.KubectlJSON(&list, "get", "ciliumnodes")
	out := map[string]string{}
	for _, n := range list.Items {
		if len(n.Spec.IPAM.PodCIDRs) > 0 {
			out[n.Name] = n.Spec.IPAM.PodCIDRs[0]
		}
	}
	return out
}

// checkEndpointsAndIdentity: one CiliumEndpoint per pod with its address
// and node, and all pods of the Deployment share one identity across the
// nodes, whose CiliumIdentity carries their labels.
func checkEndpointsAndIdentity(t *testing.T, lab *Lab, pods []echoPod) {
	t.Helper()
	var nodes nodeAddrList
	lab.KubectlJSON(&nodes, "get", "nodes")
	nodeIP := nodes.internalIPs()
	var ceps v2.CiliumEndpointList
	lab.Eventually("a CiliumEndpoint for every echo pod", time.Minute, func() error {
		lab.KubectlJSON(&ceps, "get", "ciliumendpoints")
		ids := map[int64]bool{}
		for _, p := range pods {
			i := slices.IndexFunc(ceps.Items, func(c v2.CiliumEndpoint) bool { return c.Name == p.name })
			if i < 0 {
				return fmt.Errorf("no CiliumEndpoint for %s", p.name)
			}
			s := ceps.Items[i].Status
			if s.Identity == nil || s.Networking == nil || len(s.Networking.Addressing) == 0 {
				return fmt.Errorf("CiliumEndpoint %s incomplete: %+v", p.name, s)
			}
			if s.Networking.Addressing[0].IPV4 != p.ip || s.Networking.NodeIP != nodeIP[p.node] {
				return fmt.Errorf("CiliumEndpoint %s: %s on %s, want %s on %s", p.name,
					s.Networking.Addressing[0].IPV4, s.Networking.NodeIP, p.ip, nodeIP[p.node])
			}
			ids[s.Identity.ID] = true
		}
		if len(ids) != 1 {
			return fmt.Errorf("identities %v: want one for all echo pods", ids)
		}
		return nil
	})
	id := ceps.Items[slices.IndexFunc(ceps.Items, func(c v2.CiliumEndpoint) bool { return c.Name == pods[0].name })].Status.Identity.ID
	var ident v2.CiliumIdentity
	lab.KubectlJSON(&ident, "get", "ciliumidentity", strconv.FormatInt(id, 10))
	if ident.SecurityLabels["k8s:app"] != "echo" || ident.SecurityLabels["k8s:io.kubernetes.pod.namespace"] != "default" {
		t.Errorf("CiliumIdentity %d labels %v: want app=echo in namespace default", id, ident.SecurityLabels)
	}
}

type nodeAddrList struct {
	Items []struct {
		Metadata objectMeta `json:"metadata"`
		Status   struct {
			Addresses []struct {
				Type    string `json:"type"`
				Address string `json:"address"`
			} `json:"addresses"`
		} `json:"status"`
	} `json:"items"`
}

func (l nodeAddrList) internalIPs() map[string]string {
	out := map[string]string{}
	for _, n := range l.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == "InternalIP" {
				out[n.Metadata.Name] = a.Address
			}
		}
	}
	return out
}

// flow is a stream's client (a pod's name, or outsideClient) and server
// (address[:port], 8080 when no port).
// flow is a client's stream: script (streamClient when empty) in pod
// from towards to.
type flow struct{ from, to, script string }

// agentRestartKeepsTCP kills the agent of node while each flow's client
// sends a request every 50 ms on one keep-alive connection, through the
// kill, the restart and the restarted agent's restore: no request may
// fail, and the longest gap between two answers is reported. tracked is
// an address the node's conntrack map must hold a connection of before
// the kill. whileDown, if not nil, runs right after the kill, while the
// agent is away.
func agentRestartKeepsTCP(t *testing.T, lab *Lab, node, tracked string, whileDown func(), flows ...flow) {
	t.Helper()
	var streams []*stream
	targets := make([]string, 0, len(flows))
	for _, f := range flows {
		script := f.script
		if script == "" {
			script = streamClient
		}
		streams = append(streams, lab.startClient(f.from, f.to, script))
		targets = append(targets, f.from+" -> "+f.to)
	}
	lab.Eventually("the connections in the node's conntrack map", 30*time.Second, func() error {
		ct, err := lab.dbg(node, "bpf", "ct", "list", "-o", "json")
		if err != nil || !strings.Contains(ct, `"`+tracked+`"`) {
			return fmt.Errorf("no connection of %s: %v", tracked, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
	pid := agentPID(t, node)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if whileDown != nil {
		whileDown()
	}
	lab.Eventually("the agent back and healthy", time.Minute, func() error {
		if p := agentPIDOrZero(node); p == 0 || p == pid {
			return fmt.Errorf("agent not restarted yet")
		}
		_, err := lab.dbg(node, "status")
		return err
	})
	healthy := time.Now()
	// A healthy agent still restores endpoints and prunes stale map entries:
	// the streams go on for a while after.
	until := healthy.Add(5 * time.Second)
	for i, s := range streams {
		lab.Eventually(targets[i]+": answers on the stream 5s after the agent is healthy", time.Minute, func() error {
			if !s.progressAfter(until) {
				out := s.output()
				return fmt.Errorf("no answer after %s yet; the client printed, last:\n%s", until.Format(time.TimeOnly), out[max(0, len(out)-2000):])
			}
			return nil
		})
		sum := s.stop(t)
		t.Logf("one connection %s (client port %d) across the agent restart: %d requests every %v, %d failed; "+
			"longest gap %.0f ms, at kill%+.1fs; %d gaps over %v; the agent took %v to be healthy again", targets[i],
			sum.Port, sum.OK+sum.Failed, streamInterval, sum.Failed, sum.Longest*1000,
			fromUnix(sum.LongestAt).Sub(killed).Seconds(), sum.Gaps, 2*streamInterval, healthy.Sub(killed).Round(time.Millisecond))
		if sum.Failed > 0 {
			t.Fatalf("a request to %s failed across the agent restart: %s\n%s", targets[i], sum.Error, s.output())
		}
		if first, last := fromUnix(sum.First), fromUnix(sum.Last); first.After(killed) || last.Before(until) {
			t.Fatalf("the stream to %s ran from %s to %s: it does not cover the kill at %s and the restart until %s", targets[i],
				first.Format(time.TimeOnly), last.Format(time.TimeOnly), killed.Format(time.TimeOnly), until.Format(time.TimeOnly))
		}
	}
}

// dbg runs cilium-dbg on a node.
func (l *Lab) dbg(node string, args ...string) (string, error) {
	return l.run("cilium-lab", append([]string{"exec", "--state-dir", l.StateDir, node, "--",
		filepath.Join(*binDir, "cilium-dbg")}, args...)...)
}

func agentPID(t *testing.T, node string) int {
	t.Helper()
	pid := agentPIDOrZero(node)
	if pid == 0 {
		t.Fatalf("no cilium-agent process for %s", node)
	}
	return pid
}

// agentPIDOrZero finds the agent of node among the machine's processes.
func agentPIDOrZero(node string) int {
	arg := "--k8s-node-name=" + node
	return findProcess(func(args []string) bool {
		return filepath.Base(args[0]) == "cilium-agent" && slices.Contains(args, arg)
	})
}

// findProcess is the first process whose command line match accepts, or 0.
func findProcess(match func(args []string) bool) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(strings.Split(string(b), "\x00")) {
			return pid
		}
	}
	return 0
}

// checkGone: a deleted pod leaves no endpoint, map entry or
// CiliumEndpoint behind, on its node or the other.
func checkGone(t *testing.T, lab *Lab, gone echoPod, nodes ...string) {
	t.Helper()
	quoted := []string{`"` + gone.ip + `"`, `"` + gone.ip + `/32"`}
	lab.Eventually("nothing left of "+gone.name, time.Minute, func() error {
		if out, err := lab.run("kubectl", "get", "ciliumendpoint", gone.name); err == nil {
			return fmt.Errorf("CiliumEndpoint %s still there:\n%s", gone.name, out)
		}
		for _, node := range nodes {
			for _, cmd := range [][]string{{"endpoint", "list"}, {"bpf", "endpoint", "list"}, {"bpf", "ipcache", "list"}} {
				out, err := lab.dbg(node, append(cmd, "-o", "json")...)
				if err != nil {
					return fmt.Errorf("%s on %s: %w\n%s", strings.Join(cmd, " "), node, err, out)
				}
				for _, q := range quoted {
					if strings.Contains(out, q) {
						return fmt.Errorf("%s on %s still holds %s", strings.Join(cmd, " "), node, gone.ip)
					}
				}
			}
		}
		return nil
	})
}

// operatorFailoverKeepsIPAM kills the leading operator: the standby takes
// the Lease, and every node keeps its pod CIDR.
func operatorFailoverKeepsIPAM(t *testing.T, lab *Lab, cidrs map[string]string) {
	t.Helper()
	holder := func() string {
		out, _ := lab.run("kubectl", "-n", "kube-system", "get", "lease", "cilium-operator-resource-lock",
			"-o", "jsonpath={.spec.holderIdentity}")
		return strings.TrimSpace(out)
	}
	var leader string
	lab.Eventually("an operator leads", time.Minute, func() error {
		if leader = holder(); leader == "" {
			return fmt.Errorf("no Lease holder")
		}
		return nil
	})
	// As pods, the identity is the pod's name (--leader-election-identity);
	// as processes, the replica's host and PID.
	if _, err := lab.run("kubectl", "-n", "kube-system", "get", "pod", leader); err == nil {
		lab.Kubectl("-n", "kube-system", "delete", "pod", leader, "--grace-period=0", "--force", "--wait=false")
	} else {
		pid, err := strconv.Atoi(leader[strings.LastIndex(leader, "-")+1:])
		if err != nil {
			t.Fatalf("Lease holder %q is no pod and does not end in a PID", leader)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill the leading operator %s: %v", leader, err)
		}
	}
	lab.Eventually("another operator takes over", 2*time.Minute, func() error {
		if h := holder(); h == leader || h == "" {
			return fmt.Errorf("Lease still held by %q", h)
		}
		return nil
	})
	lab.Eventually("the new leader keeps every pod CIDR", time.Minute, func() error {
		if got := ciliumNodeCIDRs(lab); !maps.Equal(got, cidrs) {
			return fmt.Errorf("CiliumNode pod CIDRs %v, were %v", got, cidrs)
		}
		return nil
	})
}
