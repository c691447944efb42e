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

// l2Manifest: a pool of one address on the underlay, a policy that
// announces the LoadBalancer addresses of the Services labelled l2 on the
// nodes' uplinks, and a Service of the l2-announcer class that asks the
// pool for that address.
const l2Manifest = `apiVersion: cilium.io/v2
kind: CiliumLoadBalancerIPPool
metadata: {name: e2e-l2-pool}
spec:
  blocks:
  - {start: VIP}
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
  annotations: {lbipam.cilium.io/ips: VIP}
spec:
  type: LoadBalancer
  loadBalancerClass: io.cilium/l2-announcer
  selector: {app: echo}
  ports:
  - {port: 80, targetPort: 8080}
`

// l2Lease is the Lease that elects echo-l2's announcer, as Cilium names it.
const l2Lease = "cilium-l2announce-default-echo-l2"

var (
	arpReply = regexp.MustCompile(`reply from (\S+) \[([0-9A-Fa-f:]+)\]`)
	linkMAC  = regexp.MustCompile(`link/ether ([0-9a-f:]+)`)
)

// checkL2Announcement proves L2 announcements on the lab's underlay, a
// plain L2 segment: LB-IPAM gives a Service of the l2-announcer class an
// address of the underlay, one node (the Lease's holder, named in an event
// on the Service and in cilium-dbg) answers ARP for it, the outside client
// reaches the Service through it with no route of its own, and when the
// holder's agent pod is deleted another node takes over within the Lease's
// duration and 2 s, and the outside client gets through again.
func checkL2Announcement(t *testing.T, lab *Lab) {
	t.Helper()
	var list nodeAddrList
	lab.KubectlJSON(&list, "get", "nodes")
	ips := list.internalIPs()
	var any netip.Addr
	for _, ip := range ips {
		any = netip.MustParseAddr(ip)
		break
	}
	// The underlay's nodes count up from .11 and the outside client is its
	// last address: .200 of the nodes' /24 is free.
	b := any.As4()
	b[3] = 200
	vip := netip.AddrFrom4(b).String()
	lab.KubectlApply(strings.ReplaceAll(l2Manifest, "VIP", vip))

	lab.Eventually("LB-IPAM gives echo-l2 "+vip, time.Minute, func() error {
		out, err := lab.run("kubectl", "get", "service", "echo-l2", "-o", `jsonpath={.status.loadBalancer.ingress[*].ip}`)
		if err != nil || strings.TrimSpace(out) != vip {
			return fmt.Errorf("echo-l2's addresses: %v %q, want %s", err, out, vip) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
	outside := func(args ...string) (string, error) {
		return lab.run("cilium-lab", append([]string{"exec", "--state-dir", lab.StateDir, outsideClient, "--"}, args...)...)
	}
	macs := map[string]string{} // node -> its uplink's MAC
	for node := range ips {
		// Through netlink: a node's /sys is the machine's.
		out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, node, "--", "ip", "-o", "link", "show", "eth0")
		m := linkMAC.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s's MAC: %v: %s", node, err, out)
		}
		macs[node] = strings.ToLower(m[1])
	}
	// answering are the MACs that answer ARP for the address.
	answering := func() ([]string, error) {
		out, _ := outside("arping", "-c", "3", "-w", "4", "-I", "eth0", vip) // exit 1 when nobody answers
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
	holder := func() string {
		out, _ := lab.run("kubectl", "-n", "kube-system", "get", "lease", l2Lease, "-o", "jsonpath={.spec.holderIdentity}")
		return strings.TrimSpace(out)
	}
	// announcedBy waits until exactly one node holds the address in its
	// responder map (with a Lease per Service: the Lease's holder), only
	// its MAC answers ARP, and the outside client reaches the Service
	// through it.
	announcedBy := func(what string, perService bool, not string) string {
		var h string
		lab.Eventually(what, time.Minute, func() error {
			var holders []string
			for node := range ips {
				if out, err := lab.dbg(node, "bpf", "l2-responder", "list"); err == nil && strings.Contains(out, vip) {
					holders = append(holders, node)
				}
			}
			if len(holders) != 1 || holders[0] == not {
				return fmt.Errorf("%s in the responder maps of %v", vip, holders)
			}
			h = holders[0]
			if perService && holder() != h {
				return fmt.Errorf("lease %s held by %q, the responder is %s's", l2Lease, holder(), h)
			}
			got, err := answering()
			if err != nil {
				return err
			}
			if len(got) != 1 || got[0] != macs[h] {
				return fmt.Errorf("ARP for %s answered by %v, want only the announcer %s's %s", vip, got, h, macs[h])
			}
			if out, err := outside("curl", "-sS", "-m", "3", "http://"+vip+"/hostname"); err != nil {
				return fmt.Errorf("the outside client through %s: %w: %s", h, err, out)
			}
			return nil
		})
		return h
	}
	// takeOver deletes the announcer's agent pod and waits for another
	// node to announce the address.
	takeOver := func(first string, perService bool) (string, time.Duration) {
		var pods corev1.PodList
		lab.KubectlJSON(&pods, "-n", "kube-system", "get", "pods", "-l", "k8s-app=cilium", "--field-selector", "spec.nodeName="+first)
		if len(pods.Items) != 1 {
			t.Fatalf("agent pods on %s: %d", first, len(pods.Items))
		}
		start := time.Now()
		lab.Kubectl("-n", "kube-system", "delete", "pod", pods.Items[0].Name, "--wait=false")
		second := announcedBy("another node takes "+vip+" over", perService, first)
		took := time.Since(start)
		const leaseDuration = 15 * time.Second // the agents' default
		if took > leaseDuration+2*time.Second {
			t.Errorf("the announcement moved from %s to %s in %s, more than the lease's %s and 2 s", first, second, took, leaseDuration)
		}
		return second, took
	}

	first := announcedBy("one node announces "+vip, true, "")
	out := lab.Kubectl("get", "events", "--field-selector", "involvedObject.name=echo-l2,reason=L2Announcement", "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(out, first+" announces "+vip) {
		t.Errorf("events on echo-l2 %q, want one naming %s", out, first)
	}
	second, took := takeOver(first, true)
	t.Logf("a Lease per Service: %s announced by %s (the only MAC answering ARP, the outside client served); after its agent pod was deleted, %s took over in %s",
		vip, first, second, took.Round(100*time.Millisecond))

	// A Lease per node: the agents restarted with it, one node announces,
	// and another takes over from it as fast.
	lab.Kubectl("-n", "kube-system", "patch", "configmap", "cilium-config", "--type=merge",
		"-p", `{"data":{"l2-announcements-election":"node"}}`)
	lab.Kubectl("-n", "kube-system", "rollout", "restart", "daemonset/cilium")
	lab.Kubectl("-n", "kube-system", "rollout", "status", "daemonset/cilium", "--timeout=3m")
	first = announcedBy("one node announces "+vip+" with a Lease per node", false, "")
	if out := lab.Kubectl("-n", "kube-system", "get", "leases", "-l", "l2announce.cilium.io/node", "-o", "name"); strings.Count(out, "cilium-l2node-") != len(ips) {
		t.Errorf("node Leases %q, want one per node", out)
	}
	second, took = takeOver(first, false)
	t.Logf("a Lease per node: %s announced by %s; after its agent pod was deleted, %s took over in %s",
		vip, first, second, took.Round(100*time.Millisecond))
}
