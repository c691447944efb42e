package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// lbManifest: a LoadBalancer Service of a class no controller in the lab
// serves, so that its status is the test's to write, as a cloud's
// controller or MetalLB would write it.
const lbManifest = `apiVersion: v1
kind: Service
metadata: {name: echo-lb, namespace: default}
spec:
  type: LoadBalancer
  loadBalancerClass: example.com/metal
  selector: {app: echo}
  ports:
  - {port: 80, targetPort: 8080}
`

const (
	lbVIP   = "203.0.113.20" // ipMode VIP: the nodes serve it
	lbProxy = "203.0.113.21" // ipMode Proxy: its load balancer sends traffic to the nodes' addresses
)

// checkLoadBalancer proves that the addresses a Service's status gives it
// are served on every node, as kube-proxy serves them: from a pod
// (translated where its connection starts, so the backend sees the pod)
// and from outside through either node, whatever the Service's
// loadBalancerClass; an address of ipMode Proxy is left to its load
// balancer; and an address the status drops is no longer served.
func checkLoadBalancer(t *testing.T, lab *Lab, client echoPod, nodes ...string) {
	t.Helper()
	lab.KubectlApply(lbManifest)
	setIngress := func(ingress string) {
		t.Helper()
		lab.Kubectl("patch", "service", "echo-lb", "--subresource=status", "--type=merge",
			"-p", `{"status":{"loadBalancer":{"ingress":[`+ingress+`]}}}`)
	}
	setIngress(`{"ip":"` + lbVIP + `"},{"ip":"` + lbProxy + `","ipMode":"Proxy"}`)

	lab.Eventually("a pod reaches the LoadBalancer address", time.Minute, func() error {
		out, err := lab.run("kubectl", "exec", client.name, "--", "curl", "-sS", "-m", "3", "http://"+lbVIP+"/clientip")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		// Translated at the pod: the backend sees the pod's address.
		if !strings.HasPrefix(strings.TrimSpace(out), client.ip+":") {
			return fmt.Errorf("the backend saw %q, want the pod's address %s", out, client.ip)
		}
		return nil
	})
	outside := func(args ...string) (string, error) {
		return lab.run("cilium-lab", append([]string{"exec", "--state-dir", lab.StateDir, outsideClient, "--"}, args...)...)
	}
	var list nodeAddrList
	lab.KubectlJSON(&list, "get", "nodes")
	ips := list.internalIPs()
	for _, node := range nodes {
		if out, err := outside("ip", "route", "replace", lbVIP+"/32", "via", ips[node]); err != nil {
			t.Fatalf("route the LoadBalancer address to %s on the outside client: %v: %s", node, err, out)
		}
		lab.Eventually("the LoadBalancer address answers the outside client through "+node, time.Minute, func() error {
			if out, err := outside("curl", "-sS", "-m", "3", "http://"+lbVIP+"/hostname"); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
	}
	for _, node := range nodes {
		out, err := lab.dbg(node, "service", "list")
		if err != nil || !strings.Contains(out, lbVIP+":80/TCP") || strings.Contains(out, lbProxy) {
			t.Errorf("cilium-dbg service list on %s: %v: want %s but not %s (ipMode Proxy):\n%s", node, err, lbVIP, lbProxy, out)
		}
	}

	checkMaglev(t, lab, outside, ips, nodes...)
	checkSourceRanges(t, lab, client, outside)

	// The status lets the address go: so does every node.
	setIngress("")
	for _, node := range nodes {
		lab.Eventually("the dropped LoadBalancer address gone from "+node, time.Minute, func() error {
			out, err := lab.dbg(node, "service", "list")
			if err != nil || strings.Contains(out, lbVIP) {
				return fmt.Errorf("cilium-dbg service list: %v: still shows %s:\n%s", err, lbVIP, out) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
			}
			return nil
		})
	}
	if out, err := lab.run("kubectl", "exec", client.name, "--", "curl", "-sS", "-m", "3", "http://"+lbVIP+"/hostname"); err == nil {
		t.Errorf("a pod reached the LoadBalancer address after the status dropped it: %s", out)
	}
	t.Logf("LoadBalancer address %s served from a pod and from outside through %v; %s (ipMode Proxy) left alone; gone once the status dropped it",
		lbVIP, nodes, lbProxy)
	checkLBIPAM(t, lab, client)
}

// checkMaglev proves Maglev on the agents as installed: once echo-lb
// asks for it (service.cilium.io/lb-algorithm, which the lab's agents
// read), each node holds a table of the default size for the LoadBalancer
// address, and a flow from outside (the client's source port) reaches the
// same backend through every node, as when a router sends it to any of
// them. Its flows spread over the backends. The outside client keeps no
// TIME_WAIT sockets meanwhile (tcp_max_tw_buckets 0 in its namespace),
// so that it may use a port again at once. Picked at random, ten flows
// would agree on every node once in 2^10.
func checkMaglev(t *testing.T, lab *Lab, outside func(...string) (string, error), ips map[string]string, nodes ...string) {
	t.Helper()
	lab.Kubectl("annotate", "service", "echo-lb", "service.cilium.io/lb-algorithm=maglev")
	defer lab.Kubectl("annotate", "service", "echo-lb", "service.cilium.io/lb-algorithm-")
	for _, node := range nodes {
		lab.Eventually("a Maglev table on "+node, time.Minute, func() error {
			out, err := lab.dbg(node, "bpf", "lb", "maglev", "list")
			if err != nil || !strings.Contains(out, " 16381 ") {
				return fmt.Errorf("cilium-dbg bpf lb maglev list: %v:\n%s", err, out) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
			}
			return nil
		})
	}
	const tw = "/proc/sys/net/ipv4/tcp_max_tw_buckets"
	old, err := outside("cat", tw)
	if err != nil {
		t.Fatalf("%s on the outside client: %v: %s", tw, err, old)
	}
	if out, err := outside("sh", "-c", "echo 0 > "+tw); err != nil {
		t.Fatalf("no TIME_WAIT on the outside client: %v: %s", err, out)
	}
	defer outside("sh", "-c", "echo "+strings.TrimSpace(old)+" > "+tw) //nolint:errcheck // the namespace goes with the lab
	const flows = 10
	picks := map[string][]string{}
	for _, node := range nodes {
		if out, err := outside("ip", "route", "replace", lbVIP+"/32", "via", ips[node]); err != nil {
			t.Fatalf("route the LoadBalancer address to %s on the outside client: %v: %s", node, err, out)
		}
		for i := range flows {
			out, err := outside("curl", "-sS", "-m", "3", "--local-port", fmt.Sprint(42000+i), "http://"+lbVIP+"/hostname")
			if err != nil {
				t.Fatalf("flow %d through %s: %v: %s", i, node, err, out)
			}
			picks[node] = append(picks[node], strings.TrimSpace(out))
		}
	}
	first := picks[nodes[0]]
	for _, node := range nodes[1:] {
		if !slices.Equal(picks[node], first) {
			t.Errorf("the same flows reached %v through %s and %v through %s", first, nodes[0], picks[node], node)
		}
	}
	seen := slices.Compact(slices.Sorted(slices.Values(first)))
	if len(seen) < 2 {
		t.Errorf("%d flows all reached %v", flows, seen)
	}
	t.Logf("Maglev: %d flows from outside reached the same backends through %v (%v)", flows, nodes, seen)
}

// ipamManifest: a pool with allowFirstLastIPs No, and a LoadBalancer
// Service of no class, which LB-IPAM serves.
const ipamManifest = `apiVersion: cilium.io/v2
kind: CiliumLoadBalancerIPPool
metadata: {name: e2e-pool}
spec:
  allowFirstLastIPs: "No"
  blocks:
  - cidr: 203.0.113.40/30
---
apiVersion: v1
kind: Service
metadata: {name: echo-ipam, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: echo}
  ports:
  - {port: 80, targetPort: 8080}
`

// checkLBIPAM proves LB-IPAM on a real API server: the operator gives a
// Service of no class the pool's first address it may hand out (the CIDR's
// first address is not one), says so in the Service's and the pool's
// conditions, and the agents serve it.
func checkLBIPAM(t *testing.T, lab *Lab, client echoPod) {
	t.Helper()
	const want = "203.0.113.41"
	lab.KubectlApply(ipamManifest)
	lab.Eventually("LB-IPAM gives echo-ipam an address", time.Minute, func() error {
		out, err := lab.run("kubectl", "get", "service", "echo-ipam", "-o",
			`jsonpath={.status.loadBalancer.ingress[*].ip} {.status.conditions[?(@.type=="cilium.io/IPAMRequestSatisfied")].reason}`)
		if err != nil || strings.TrimSpace(out) != want+" satisfied" {
			return fmt.Errorf("echo-ipam's status: %v %q, want %s satisfied", err, out, want) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
	// echo-lb's class is another controller's: LB-IPAM leaves it alone
	// (its status, emptied above, stays empty).
	if out := lab.Kubectl("get", "service", "echo-lb", "-o", `jsonpath={.status}`); strings.Contains(out, "ingress") || strings.Contains(out, "cilium.io/") {
		t.Errorf("echo-lb (loadBalancerClass example.com/metal) has status %s: LB-IPAM served another class", out)
	}
	out := lab.Kubectl("get", "ciliumloadbalancerippools", "e2e-pool", "-o",
		`jsonpath={.status.conditions[?(@.type=="cilium.io/IPsAvailable")].message} {.status.conditions[?(@.type=="cilium.io/PoolConflict")].status}`)
	if strings.TrimSpace(out) != "1 False" {
		t.Errorf("e2e-pool's conditions %q, want 1 available and no conflict", out)
	}
	lab.Eventually("a pod reaches the address LB-IPAM gave", time.Minute, func() error {
		out, err := lab.run("kubectl", "exec", client.name, "--", "curl", "-sS", "-m", "3", "http://"+want+"/hostname")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
	// A new operator (the restarted Deployment's pod, leader once the
	// lease passes) moves nothing: it reads the record back and gives the
	// next Service the pool's last address.
	lab.Kubectl("-n", "kube-system", "rollout", "restart", "deployment/cilium-operator")
	lab.Kubectl("-n", "kube-system", "rollout", "status", "deployment/cilium-operator", "--timeout=2m")
	lab.KubectlApply(strings.ReplaceAll(ipamManifest[strings.Index(ipamManifest, "apiVersion: v1"):], "echo-ipam", "echo-ipam2"))
	lab.Eventually("the new operator gives echo-ipam2 the pool's other address", 2*time.Minute, func() error {
		out, err := lab.run("kubectl", "get", "service", "echo-ipam", "echo-ipam2", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.loadBalancer.ingress[*].ip} {end}`)
		if err != nil || strings.TrimSpace(out) != "echo-ipam="+want+" echo-ipam2=203.0.113.42" {
			return fmt.Errorf("addresses %v %q, want echo-ipam=%s echo-ipam2=203.0.113.42", err, out, want) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
	t.Logf("LB-IPAM gave echo-ipam %s from e2e-pool, and a pod reached it; after an operator restart it kept it, and echo-ipam2 got the pool's other address", want)
}

// checkSourceRanges proves loadBalancerSourceRanges on the LoadBalancer
// address, updated live, as kube-proxy applies them: the outside client
// is let in while a range holds its address and kept out (silently: a
// timeout) once none does; a pod is judged by its own address, and the
// node's own process by the node's.
func checkSourceRanges(t *testing.T, lab *Lab, client echoPod, outside func(...string) (string, error)) {
	t.Helper()
	outsideIP := outsideAddr(t, outside)
	var list nodeAddrList
	lab.KubectlJSON(&list, "get", "nodes")
	nodeIP := list.internalIPs()[client.node]
	setRanges := func(ranges string) {
		t.Helper()
		lab.Kubectl("patch", "service", "echo-lb", "--type=merge", "-p", `{"spec":{"loadBalancerSourceRanges":`+ranges+`}}`)
	}
	url := "http://" + lbVIP + "/hostname"
	fromOutside := func() error {
		out, err := outside("curl", "-sS", "-m", "2", url)
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	fromPod := func() error {
		out, err := lab.run("kubectl", "exec", client.name, "--", "curl", "-sS", "-m", "2", url)
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	fromNode := func() error {
		out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, client.node, "--", "curl", "-sS", "-m", "2", url)
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	keptOut := func(what string, try func() error) {
		t.Helper()
		lab.Eventually(what+" kept out", time.Minute, func() error {
			if err := try(); err == nil {
				return errors.New("it got in")
			} else if !strings.Contains(err.Error(), "timed out") {
				return fmt.Errorf("want a timeout (a silent drop), got %w", err)
			}
			return nil
		})
	}

	// Only the outside client: pods and the node are outside the range.
	setRanges(`["` + outsideIP + `/32"]`)
	lab.Eventually("the outside client in range let in", time.Minute, fromOutside)
	keptOut("a pod out of range", fromPod)
	keptOut("the node's own process out of range", fromNode)
	lab.Eventually("hubble showing the source range drop", 30*time.Second, func() error {
		out, err := lab.hubble("observe", "--last", "1000", "--verdict", "DROPPED",
			"--drop-reason-desc", "DENIED_BY_LB_SRC_RANGE_CHECK", "-o", "json")
		if err != nil {
			return fmt.Errorf("hubble observe: %w\n%s", err, out)
		}
		if !strings.Contains(out, `"destination":"`+lbVIP+`"`) {
			return fmt.Errorf("no drop for the source range to %s:\n%s", lbVIP, out)
		}
		return nil
	})

	// The range moves to the pod and the node: the outside client is
	// kept out, they are let in.
	setRanges(`["192.0.2.0/24", "` + client.ip + `/32", "` + nodeIP + `/32"]`)
	keptOut("the outside client no longer in range", fromOutside)
	lab.Eventually("a pod in range let in", time.Minute, fromPod)
	lab.Eventually("the node's own process in range let in", time.Minute, fromNode)

	// No range: every client again.
	setRanges("null")
	lab.Eventually("the outside client let in without ranges", time.Minute, fromOutside)
	t.Logf("loadBalancerSourceRanges on %s: the outside client %s, pod %s and node %s let in or kept out by them",
		lbVIP, outsideIP, client.ip, nodeIP)
}

// outsideAddr is the outside client's address on the underlay.
func outsideAddr(t *testing.T, outside func(...string) (string, error)) string {
	t.Helper()
	out, err := outside("ip", "-4", "-o", "addr", "show", "scope", "global")
	fields := strings.Fields(out)
	i := slices.Index(fields, "inet")
	if err != nil || i < 0 || i+1 >= len(fields) {
		t.Fatalf("the outside client's address: %v: %s", err, out)
	}
	ip, _, _ := strings.Cut(fields[i+1], "/")
	return ip
}
