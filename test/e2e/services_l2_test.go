package e2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// l2Manifest: a pool of two addresses on the underlay, a policy that
// announces the LoadBalancer addresses of the Services labelled l2 on the
// nodes' uplinks, and two Services of the l2-announcer class that ask the
// pool for its addresses: echo-l2 (externalTrafficPolicy Cluster, every
// echo pod) and echo-l2-local (Local, the echo pods labelled l2-backend).
const l2Manifest = `apiVersion: cilium.io/v2
kind: CiliumLoadBalancerIPPool
metadata: {name: e2e-l2-pool}
spec:
  blocks:
  - {start: VIP1, stop: VIP2}
  serviceSelector: {matchLabels: {l2: "yes"}}
---
apiVersion: cilium.io/v2alpha1
kind: CiliumL2AnnouncementPolicy
metadata: {name: e2e-l2}
spec:
  loadBalancerIPs: true
  interfaces: ["^eth[0-9]+$"]
  serviceSelector: {matchLabels: {l2: "yes"}}
---
apiVersion: v1
kind: Service
metadata:
  name: echo-l2
  namespace: default
  labels: {l2: "yes"}
  annotations: {lbipam.cilium.io/ips: VIP1}
spec:
  type: LoadBalancer
  loadBalancerClass: io.cilium/l2-announcer
  selector: {app: echo}
  ports:
  - {port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata:
  name: echo-l2-local
  namespace: default
  labels: {l2: "yes"}
  annotations: {lbipam.cilium.io/ips: VIP2}
spec:
  type: LoadBalancer
  loadBalancerClass: io.cilium/l2-announcer
  externalTrafficPolicy: Local
  selector: {app: echo, l2-backend: "yes"}
  ports:
  - {port: 80, targetPort: 8080}
`

var (
	arpReply = regexp.MustCompile(`reply from (\S+) \[([0-9A-Fa-f:]+)\]`)
	linkMAC  = regexp.MustCompile(`link/ether ([0-9a-f:]+)`)
)

// l2Check is the lab as the L2 announcement checks see it.
type l2Check struct {
	t    *testing.T
	lab  *Lab
	macs map[string]string // node -> its uplink's MAC
	// outsideIP is the outside client's address.
	outsideIP string
}

func (c l2Check) outside(args ...string) (string, error) {
	return c.lab.run("cilium-lab", append([]string{"exec", "--state-dir", c.lab.StateDir, outsideClient, "--"}, args...)...)
}

// answering are the MACs that answer ARP for vip on the underlay.
func (c l2Check) answering(vip string) ([]string, error) {
	out, _ := c.outside("arping", "-c", "3", "-w", "4", "-I", "eth0", vip) // exit 1 when nobody answers
	var got []string
	for _, m := range arpReply.FindAllStringSubmatch(out, -1) {
		if m[1] == vip && !slices.Contains(got, strings.ToLower(m[2])) {
			got = append(got, strings.ToLower(m[2]))
		}
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("no ARP reply for %s: %s", vip, out)
	}
	return got, nil
}

// leaseHolder is the node that holds svc's Lease (a Lease per Service).
func (c l2Check) leaseHolder(svc string) string {
	out, _ := c.lab.run("kubectl", "-n", "kube-system", "get", "lease", "cilium-l2announce-default-"+svc, "-o", "jsonpath={.spec.holderIdentity}")
	return strings.TrimSpace(out)
}

// announcedBy waits until exactly one node, one of want (any node when
// empty), holds vip in its responder map (with a Lease per Service: the
// Lease's holder), only its MAC answers ARP, and the outside client
// reaches svc through it (with its own address, when local: Local keeps
// it). It returns the node.
func (c l2Check) announcedBy(what, svc, vip string, perService, local bool, want ...string) string {
	c.t.Helper()
	var h string
	c.lab.Eventually(what, time.Minute, func() error {
		var holders []string
		for node := range c.macs {
			if out, err := c.lab.dbg(node, "bpf", "l2-responder", "list"); err == nil && strings.Contains(out, vip+" ") {
				holders = append(holders, node)
			}
		}
		if len(holders) != 1 || len(want) > 0 && !slices.Contains(want, holders[0]) {
			return fmt.Errorf("%s in the responder maps of %v, want one of %v", vip, holders, want)
		}
		h = holders[0]
		if perService && c.leaseHolder(svc) != h {
			return fmt.Errorf("%s's Lease held by %q, the responder is %s's", svc, c.leaseHolder(svc), h)
		}
		got, err := c.answering(vip)
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0] != c.macs[h] {
			return fmt.Errorf("ARP for %s answered by %v, want only the announcer %s's %s", vip, got, h, c.macs[h])
		}
		out, err := c.outside("curl", "-sS", "-m", "3", "http://"+vip+"/clientip")
		if err != nil {
			return fmt.Errorf("the outside client through %s: %w: %s", h, err, out)
		}
		if local && !strings.HasPrefix(strings.TrimSpace(out), c.outsideIP+":") {
			return fmt.Errorf("the backend saw %q, want the outside client's address", out)
		}
		return nil
	})
	return h
}

// takeOver deletes the announcer's agent pod and waits for another node
// to put vip into its responder map; it fails the test when that took
// longer than the agents' lease duration and 2 s. With a Lease per Service
// the other node keeps the announcement; with a Lease per node the
// address may go back to the first once its agent is back (each Service's
// owner among the live nodes is fixed by a hash): either way, one node
// announces it in the end.
func (c l2Check) takeOver(first, vip string, perService bool) (string, time.Duration) {
	c.t.Helper()
	var pods corev1.PodList
	c.lab.KubectlJSON(&pods, "-n", "kube-system", "get", "pods", "-l", "k8s-app=cilium", "--field-selector", "spec.nodeName="+first)
	if len(pods.Items) != 1 {
		c.t.Fatalf("agent pods on %s: %d", first, len(pods.Items))
	}
	var others []string
	for n := range c.macs {
		if n != first {
			others = append(others, n)
		}
	}
	start := time.Now()
	c.lab.Kubectl("-n", "kube-system", "delete", "pod", pods.Items[0].Name, "--wait=false")
	var second string
	for second == "" {
		for _, n := range others {
			if out, err := c.lab.dbg(n, "bpf", "l2-responder", "list"); err == nil && strings.Contains(out, vip+" ") {
				second = n
			}
		}
		if time.Since(start) > time.Minute {
			c.t.Fatalf("no other node than %s announces %s a minute after its agent pod was deleted", first, vip)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	const leaseDuration = 15 * time.Second // the agents' default
	if took > leaseDuration+2*time.Second {
		c.t.Errorf("the announcement moved from %s to %s in %s, more than the lease's %s and 2 s", first, second, took, leaseDuration)
	}
	if perService {
		c.announcedBy(second+" keeps announcing "+vip, "echo-l2", vip, true, false, second)
	} else {
		c.announcedBy("one node announces "+vip+" once "+first+"'s agent is back", "echo-l2", vip, false, false)
	}
	return second, took
}

// checkL2Announcement proves L2 announcements on the lab's underlay, a
// plain L2 segment: LB-IPAM gives Services of the l2-announcer class
// addresses of the underlay, one node (the Lease's holder, named in an
// event on the Service and in cilium-dbg) answers ARP for each, and the
// outside client reaches the Services through it with no route of its
// own. With externalTrafficPolicy Local only a node with the backend
// announces, the backend sees the client's address, and the announcement
// follows the backend to another node. When the announcer's agent pod is
// deleted another node takes over within the Lease's duration and 2 s. The
// same again with a Lease per node.
func checkL2Announcement(t *testing.T, lab *Lab, client echoPod) {
	t.Helper()
	c := l2Check{t: t, lab: lab, macs: map[string]string{}}
	c.outsideIP = outsideAddr(t, c.outside)
	var list nodeAddrList
	lab.KubectlJSON(&list, "get", "nodes")
	var vip1, vip2 string
	for node, ip := range list.internalIPs() {
		// Through netlink: a node's /sys is the machine's.
		out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, node, "--", "ip", "-o", "link", "show", "eth0")
		m := linkMAC.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s's MAC: %v: %s", node, err, out)
		}
		c.macs[node] = strings.ToLower(m[1])
		// The underlay's nodes count up from .11 and the outside client
		// is its last address: .200 and .201 of the nodes' /24 are free.
		b := netip.MustParseAddr(ip).As4()
		b[3] = 200
		vip1 = netip.AddrFrom4(b).String()
		b[3] = 201
		vip2 = netip.AddrFrom4(b).String()
	}
	// echo-l2-local's one backend: an echo pod on the client's node.
	var pods corev1.PodList
	lab.KubectlJSON(&pods, "get", "pods", "-l", "app=echo")
	backendOn := func(node string) string {
		for _, p := range pods.Items {
			if p.Spec.NodeName == node {
				return p.Name
			}
		}
		t.Fatalf("no echo pod on %s", node)
		return ""
	}
	backend := backendOn(client.node)
	lab.Kubectl("label", "pod", backend, "l2-backend=yes")
	lab.KubectlApply(strings.NewReplacer("VIP1", vip1, "VIP2", vip2).Replace(l2Manifest))
	lab.Eventually("LB-IPAM gives echo-l2 "+vip1+" and echo-l2-local "+vip2, time.Minute, func() error {
		out, err := lab.run("kubectl", "get", "service", "echo-l2", "echo-l2-local", "-o",
			`jsonpath={range .items[*]}{.status.loadBalancer.ingress[*].ip} {end}`)
		if err != nil || strings.TrimSpace(out) != vip1+" "+vip2 {
			return fmt.Errorf("addresses: %v %q, want %s %s", err, out, vip1, vip2) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})

	first := c.announcedBy("one node announces "+vip1, "echo-l2", vip1, true, false)
	out := lab.Kubectl("get", "events", "--field-selector", "involvedObject.name=echo-l2,reason=L2Announcement", "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(out, first+" announces "+vip1) {
		t.Errorf("events on echo-l2 %q, want one naming %s", out, first)
	}
	// Local: the backend's node, and the next one's when the backend moves.
	c.announcedBy("the backend's node "+client.node+" announces "+vip2, "echo-l2-local", vip2, true, true, client.node)
	var other string
	for n := range c.macs {
		if n != client.node {
			other = n
		}
	}
	lab.Kubectl("label", "pod", backend, "l2-backend-")
	lab.Kubectl("label", "pod", backendOn(other), "l2-backend=yes")
	c.announcedBy("the announcement follows the backend to "+other, "echo-l2-local", vip2, true, true, other)
	// The label gives the pod an identity of its own: the later checks want
	// every echo pod alike.
	defer lab.Kubectl("label", "pod", backendOn(other), "l2-backend-")

	second, took := c.takeOver(first, vip1, true)
	t.Logf("a Lease per Service: %s announced by %s (the only MAC answering ARP, the outside client served), after its agent pod was deleted by %s in %s; %s (Local) by its backend's node, following it to %s",
		vip1, first, second, took.Round(100*time.Millisecond), vip2, other)

	// A Lease per node: the agents restarted with it, one node announces,
	// and another takes over from it as fast.
	lab.Kubectl("-n", "kube-system", "patch", "configmap", "cilium-config", "--type=merge",
		"-p", `{"data":{"l2-announcements-election":"node"}}`)
	lab.Kubectl("-n", "kube-system", "rollout", "restart", "daemonset/cilium")
	lab.Kubectl("-n", "kube-system", "rollout", "status", "daemonset/cilium", "--timeout=3m")
	first = c.announcedBy("one node announces "+vip1+" with a Lease per node", "echo-l2", vip1, false, false)
	c.announcedBy("the backend's node "+other+" announces "+vip2+" with a Lease per node", "echo-l2-local", vip2, false, true, other)
	if out := lab.Kubectl("-n", "kube-system", "get", "leases", "-l", "l2announce.cilium.io/node", "-o", "name"); strings.Count(out, "cilium-l2node-") != len(c.macs) {
		t.Errorf("node Leases %q, want one per node", out)
	}
	second, took = c.takeOver(first, vip1, false)
	t.Logf("a Lease per node: %s announced by %s; after its agent pod was deleted, %s took over in %s",
		vip1, first, second, took.Round(100*time.Millisecond))
}
