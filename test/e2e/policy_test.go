package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// policyCase is one state of the cluster's policies and what the matrix
// must show in it. Cases run in order on one lab; each starts from the
// previous one's objects unless it deletes them (clean).
type policyCase struct {
	name string
	// clean deletes every policy before the case.
	clean bool
	// change runs before apply: relabels and the like.
	change func(l *Lab)
	// apply is applied with $ns/pod replaced by the pod's address and
	// $outside, $node1 and $node2 by the outside client's and the nodes'.
	apply  string
	expect expectation
	// reach lists targets outside the matrix: from a pod to a server on
	// the outside client or on a node ($outside, $node1, $node2), and
	// whether it connects.
	reach []outsideProbe
	// verify checks what else the case promises (statuses, events).
	verify func(l *Lab) error
	// observed checks, once the probes ran, what was seen of them.
	observed func(l *Lab) error
}

type outsideProbe struct {
	// to is an address as targets.address names it, with ":port" when
	// not targetPort.
	from, to string
	want     bool
}

// Small expectations to build cases from.
func to(ns, name string) func(*matrixPod) bool {
	return func(p *matrixPod) bool { return p.ns == ns && p.name == name }
}

func inNS(ns ...string) func(*matrixPod) bool {
	return func(p *matrixPod) bool { return slicesContains(ns, p.ns) }
}

func slicesContains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// ingressTo: traffic into pods that target selects is allowed only as
// allow says; everything else is allowed. A pod reaches itself always.
func ingressTo(target func(*matrixPod) bool, allow func(from *matrixPod, k probeKind) bool) expectation {
	return func(from, dst *matrixPod, k probeKind) bool {
		return from == dst || !target(dst) || allow(from, k)
	}
}

// egressFrom is ingressTo for traffic out of the pods that source selects.
func egressFrom(source func(*matrixPod) bool, allow func(dst *matrixPod, k probeKind) bool) expectation {
	return func(from, dst *matrixPod, k probeKind) bool {
		return from == dst || !source(from) || allow(dst, k)
	}
}

func allowAll(*matrixPod, *matrixPod, probeKind) bool { return true }

func port(proto string, p int) func(probeKind) bool {
	return func(k probeKind) bool { return k.proto == proto && k.port == p }
}

func networkPolicyCases() []policyCase {
	xa := to("x", "a")
	return []policyCase{
		{name: "no policy", clean: true, expect: allowAll},
		{name: "deny all ingress to x/a", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-a, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress]
`, expect: ingressTo(xa, func(*matrixPod, probeKind) bool { return false })},
		{name: "ingress from the same namespace (podSelector {})", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: same-ns, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.ns == "x" })},
		{name: "namespaceSelector by kubernetes.io/metadata.name", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-y, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "y"}}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.ns == "y" })},
		{name: "podSelector and namespaceSelector in one peer", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: yb, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: "y"}}, podSelector: {matchLabels: {pod: b}}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.ns == "y" && from.name == "b" })},
		{name: "podSelector or namespaceSelector, two peers", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b-or-z, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: z}}}, {podSelector: {matchLabels: {pod: b}}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.ns == "z" || (from.ns == "x" && from.name == "b") })},
		{name: "one port", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: tcp-81, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{port: 81}]}]
`, expect: ingressTo(xa, func(_ *matrixPod, k probeKind) bool { return port("tcp", 81)(k) })},
		{name: "a port range with endPort", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: range, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{port: 80, endPort: 81, protocol: UDP}]}]
`, expect: ingressTo(xa, func(_ *matrixPod, k probeKind) bool { return k.proto == "udp" })},
		{name: "a named port", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{port: serve-81-udp, protocol: UDP}]}]
`, expect: ingressTo(xa, func(_ *matrixPod, k probeKind) bool { return port("udp", 81)(k) })},
		{name: "a named port nobody has isolates and allows nothing", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named-none, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{port: serve-99-tcp}]}]
`, expect: ingressTo(xa, func(*matrixPod, probeKind) bool { return false })},
		{name: "a policy naming only SCTP isolates TCP and UDP", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: sctp, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{port: 80, protocol: SCTP}]}]
`, expect: ingressTo(xa, func(*matrixPod, probeKind) bool { return false })},
		{name: "egress only to namespace y", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: egress-y, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress: [{to: [{namespaceSelector: {matchLabels: {ns: "y"}}}]}]
`, expect: egressFrom(xa, func(dst *matrixPod, _ probeKind) bool { return dst.ns == "y" })},
		{name: "egress to a named port of the destination", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: egress-named, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress: [{ports: [{port: serve-80-tcp}]}]
`, expect: egressFrom(xa, func(_ *matrixPod, k probeKind) bool { return port("tcp", 80)(k) })},
		{name: "two policies add up", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-yb, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: "y"}}, podSelector: {matchLabels: {pod: b}}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-zc, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: z}}, podSelector: {matchLabels: {pod: c}}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "y/b" || from.String() == "z/c" })},
		{name: "a policy updated", apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-yb, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: "y"}}, podSelector: {matchLabels: {pod: a}}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "y/a" || from.String() == "z/c" })},
		{name: "a pod relabelled", change: func(l *Lab) {
			l.Kubectl("-n", "z", "label", "pod", "c", "pod=c2", "--overwrite")
		}, expect: func(from, dst *matrixPod, k probeKind) bool {
			// z/c left its Service too: no one reaches it that way.
			if dst.String() == "z/c" && k.service {
				return false
			}
			return ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "y/a" })(from, dst, k)
		}},
		{name: "a pod relabelled back", change: func(l *Lab) {
			l.Kubectl("-n", "z", "label", "pod", "c", "pod=c", "--overwrite")
		}, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "y/a" || from.String() == "z/c" })},
		{name: "a namespace relabelled", change: func(l *Lab) {
			l.Kubectl("label", "namespace", "y", "ns=y2", "--overwrite")
		}, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "z/c" })},
		{name: "a policy deleted", change: func(l *Lab) {
			l.Kubectl("label", "namespace", "y", "ns=y", "--overwrite")
			l.Kubectl("-n", "x", "delete", "networkpolicy", "from-zc")
		}, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "y/a" })},
		{name: "ipBlock matches a pod's address", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-yb-ip, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{ipBlock: {cidr: $y/b/32}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "y/b" })},
		{name: "ipBlock with except, over every pod", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: all-but-yb, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{ipBlock: {cidr: 0.0.0.0/0, except: [$y/b/32]}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() != "y/b" })},
		{name: "egress ipBlock matches nodes and the outside", clean: true, apply: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: to-nodes, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress: [{to: [{ipBlock: {cidr: $node1/32}}, {ipBlock: {cidr: $outside/32}}]}]
`, expect: egressFrom(xa, func(*matrixPod, probeKind) bool { return false }),
			reach: []outsideProbe{{"x/a", "$node1", true}, {"x/a", "$node2", false}, {"x/a", "$outside", true}}},
		{name: "every policy deleted", clean: true, expect: allowAll},
	}
}

func ciliumPolicyCases() []policyCase {
	xa := to("x", "a")
	isolated := egressFrom(xa, func(*matrixPod, probeKind) bool { return false })
	return []policyCase{
		{name: "CiliumNetworkPolicy: toCIDR the outside client", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: to-outside, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  egress: [{toCIDR: [$outside/32]}]
`, expect: isolated, reach: []outsideProbe{{"x/a", "$outside", true}, {"x/b", "$outside", true}}},
		{name: "CiliumNetworkPolicy: toCIDRSet with the outside client excepted", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: not-outside, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  egress: [{toCIDRSet: [{cidr: 0.0.0.0/0, except: [$outside/32]}]}]
`, expect: egressFrom(xa, func(*matrixPod, probeKind) bool { return false }),
			reach: []outsideProbe{{"x/a", "$outside", false}, {"x/b", "$outside", true}}},
		{name: "CiliumNetworkPolicy: the world entity", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: to-world, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  egress: [{toEntities: [world]}]
`, expect: isolated, reach: []outsideProbe{{"x/a", "$outside", true}, {"x/a", "$node1", false}}},
		{name: "CiliumNetworkPolicy: the host and remote-node entities", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: to-host, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  egress: [{toEntities: [host]}]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: to-remote-node, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: b}}
  egress: [{toEntities: [remote-node]}]
`, expect: egressFrom(func(p *matrixPod) bool { return p.ns == "x" && p.name != "c" }, func(*matrixPod, probeKind) bool { return false }),
			reach: []outsideProbe{{"x/a", "$host(x/a)", true}, {"x/a", "$remote(x/a)", false}, {"x/a", "$outside", false},
				{"x/b", "$host(x/b)", false}, {"x/b", "$remote(x/b)", true}}},
		// Policy judges the backend at every address its Service answers
		// on: x/a may reach both nodes, but no pod, so not y/a through a
		// NodePort of its own node or of the other one.
		{name: "CiliumNetworkPolicy: a backend denied stays denied through any node's NodePort", clean: true, apply: `
apiVersion: v1
kind: Service
metadata: {name: np-a, namespace: "y"}
spec:
  type: NodePort
  selector: {pod: a}
  ports: [{name: tcp-80, port: 80, protocol: TCP, nodePort: 30080}]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: nodes-only, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  egress: [{toEntities: [host, remote-node]}]
`, expect: isolated,
			reach: []outsideProbe{{"x/a", "$host(x/a)", true}, {"x/a", "$remote(x/a)", true},
				{"x/a", "$host(x/a):30080", false}, {"x/a", "$remote(x/a):30080", false},
				{"x/b", "$host(x/b):30080", true}, {"x/b", "$remote(x/b):30080", true}}},
		{name: "CiliumNetworkPolicy: fromEndpoints are of the policy's namespace", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: from-b, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress: [{fromEndpoints: [{matchLabels: {pod: b}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "x/b" })},
		{name: "CiliumNetworkPolicy: an explicit namespace label reaches other namespaces", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: from-zb, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress: [{fromEndpoints: [{matchLabels: {pod: b, k8s:io.kubernetes.pod.namespace: z}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "z/b" })},
		{name: "CiliumNetworkPolicy: deny wins over allow", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: all-but-y, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress: [{fromEntities: [all]}]
  ingressDeny: [{fromEndpoints: [{matchLabels: {k8s:io.kubernetes.pod.namespace: "y"}}], toPorts: [{ports: [{port: "80", protocol: TCP}]}]}]
`, expect: ingressTo(xa, func(from *matrixPod, k probeKind) bool { return from.ns != "y" || !port("tcp", 80)(k) }),
			observed: hubbleShows([]string{"--to-pod", "x/a", "--from-namespace", "y", "--to-port", "80", "--verdict", "DROPPED"},
				"ingress-denied-by=CiliumNetworkPolicy:x/all-but-y", "Policy deny DROPPED")},
		{name: "CiliumNetworkPolicy: toPorts with protocol ANY", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: any-80, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress: [{toPorts: [{ports: [{port: "80"}]}]}]
`, expect: ingressTo(xa, func(_ *matrixPod, k probeKind) bool { return k.port == 80 })},
		{name: "CiliumNetworkPolicy: egress deny without default deny", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: not-z, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  enableDefaultDeny: {egress: false}
  egressDeny: [{toEndpoints: [{matchLabels: {k8s:io.kubernetes.pod.namespace: z}}]}]
`, expect: egressFrom(xa, func(dst *matrixPod, _ probeKind) bool { return dst.ns != "z" })},
		{name: "CiliumNetworkPolicy: toServices, the pods of the Services of a name in every namespace and of one named", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: to-services, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  egress: [{toServices: [{k8sService: {serviceName: s-b}}, {k8sService: {serviceName: s-c, namespace: "y"}}]}]
`, expect: egressFrom(xa, func(dst *matrixPod, _ probeKind) bool { return dst.name == "b" || dst.String() == "y/c" }),
			reach: []outsideProbe{{"x/a", "$outside", false}},
			verify: func(l *Lab) error {
				if err := policyCondition("x", "to-services", "True", "")(l); err != nil {
					return err
				}
				if err := trace(l, "x/a", "z/b", "Final verdict: ALLOWED", "CiliumNetworkPolicy/x/to-services"); err != nil {
					return err
				}
				return trace(l, "x/a", "z/c", "Final verdict: DENIED")
			}},
		{name: "CiliumNetworkPolicy: toServices naming a Service that does not exist allows nothing", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: to-late, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  egress: [{toServices: [{k8sService: {serviceName: s-late}}]}]
`, expect: isolated},
		{name: "CiliumNetworkPolicy: toServices follows the Service when it comes", change: func(l *Lab) {
			l.KubectlApply(`
apiVersion: v1
kind: Service
metadata: {name: s-late, namespace: x}
spec:
  selector: {pod: c}
  ports: [{name: tcp-80, port: 80, protocol: TCP}]
`)
		}, expect: egressFrom(xa, func(dst *matrixPod, _ probeKind) bool { return dst.String() == "x/c" })},
		{name: "CiliumNetworkPolicy: toServices follows the Service when it goes", change: func(l *Lab) {
			l.Kubectl("-n", "x", "delete", "service", "s-late")
		}, expect: isolated},
		{name: "CiliumClusterwideNetworkPolicy: every namespace", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: a-from-c}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress: [{fromEndpoints: [{matchLabels: {pod: c}}]}]
`, expect: ingressTo(func(p *matrixPod) bool { return p.name == "a" }, func(from *matrixPod, _ probeKind) bool { return from.name == "c" })},
		{name: "CiliumClusterwideNetworkPolicy: the cluster entity", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: z-cluster-81}
spec:
  endpointSelector: {matchLabels: {k8s:io.kubernetes.pod.namespace: z}}
  ingress: [{fromEntities: [cluster], toPorts: [{ports: [{port: "81", protocol: TCP}]}]}]
`, expect: ingressTo(inNS("z"), func(_ *matrixPod, k probeKind) bool { return port("tcp", 81)(k) })},
		{name: "CiliumNetworkPolicy: accepted, with its Valid condition", clean: true, apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: guard, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress: [{fromEndpoints: [{matchLabels: {pod: b}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "x/b" }),
			verify: func(l *Lab) error {
				if err := policyCondition("x", "guard", "True", "")(l); err != nil {
					return err
				}
				// The agent explains it: the rule that allows, and the
				// default that denies.
				if err := trace(l, "x/b", "x/a", "Final verdict: ALLOWED", "CiliumNetworkPolicy/x/guard"); err != nil {
					return err
				}
				return trace(l, "x/c", "x/a", "Final verdict: DENIED", "denied by default")
			}},
		{name: "CiliumNetworkPolicy: a refused update keeps the previous rules in force", apply: `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: guard, namespace: x}
spec:
  endpointSelector: {matchLabels: {pod: a}}
  ingress: [{fromEndpoints: [{matchLabels: {pod: c}}]}]
  egress: [{toPorts: [{ports: [{port: "9092", protocol: TCP}], rules: {kafka: [{topic: orders}]}}]}]
`, expect: ingressTo(xa, func(from *matrixPod, _ probeKind) bool { return from.String() == "x/b" }),
			verify: func(l *Lab) error {
				if err := policyCondition("x", "guard", "False", "spec.egress[0].toPorts[0].rules.kafka")(l); err != nil {
					return err
				}
				out, err := l.run("kubectl", "-n", "x", "get", "events", "--field-selector", "reason=PolicyRejected,involvedObject.name=guard",
					"-o", "jsonpath={.items[*].message}")
				if err != nil || !strings.Contains(out, "rules.kafka") {
					return fmt.Errorf("no PolicyRejected event naming rules.kafka: %q %v", out, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
				}
				return nil
			}},
		{name: "Cilium policies deleted", clean: true, expect: allowAll},
	}
}

// TestPrivilegedSmokePolicy runs the reachability matrix through the
// NetworkPolicy and Cilium policy features, on a cilium-go lab without
// kube-proxy.
func TestPrivilegedSmokePolicy(t *testing.T) {
	lab := StartLab(t, "e2epol", "--nodes", "2", "--cni=cilium", "--routing-mode=tunnel", "--kube-proxy=none")
	lab.KubectlApply(matrixManifest())
	pods := matrixPods(lab)
	targets := startTargets(t, lab, pods)
	for _, c := range append(networkPolicyCases(), ciliumPolicyCases()...) {
		start := time.Now()
		if c.clean {
			lab.Kubectl("delete", "networkpolicies,ciliumnetworkpolicies", "--all", "--all-namespaces")
			lab.Kubectl("delete", "ciliumclusterwidenetworkpolicies", "--all")
		}
		if c.change != nil {
			c.change(lab)
		}
		if c.apply != "" {
			lab.KubectlApply(targets.expand(strings.TrimSpace(c.apply)))
		}
		if c.verify != nil {
			lab.Eventually(c.name, 30*time.Second, func() error { return c.verify(lab) })
		}
		if checkMatrix(t, c.name, pods, c.expect) && targets.check(t, c.name, c.reach) {
			t.Logf("%s: as expected after %s", c.name, time.Since(start).Round(time.Millisecond))
			if c.observed != nil {
				lab.Eventually(c.name+": what was observed", 30*time.Second, func() error { return c.observed(lab) })
			}
		}
	}
	hubbleMetricsCounted(t, lab)
	datapathMetricsCounted(t, lab)
	agentEventsShown(t, lab)
	relayKeepsServing(t, lab)
}

// agentEventsShown: each node's Hubble tells of its agent's start, the
// matrix's pods created on it, and the policies set and deleted.
func agentEventsShown(t *testing.T, lab *Lab) {
	t.Helper()
	var all strings.Builder
	for _, node := range []string{lab.Name + "-node1", lab.Name + "-node2"} {
		out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, node, "--", filepath.Join(*binDir, "hubble"),
			"observe", "agent-events", "--last", "1000")
		if err != nil {
			t.Fatalf("hubble observe agent-events on %s: %v\n%s", node, err, out)
		}
		all.WriteString(out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\[` + lab.Name + `-node1\]: AGENT_STARTED \(start time: `),
		regexp.MustCompile(`ENDPOINT_CREATED \(id: \d+, namespace: x, pod name: a\)`),
		regexp.MustCompile(`POLICY_UPDATED \(labels: \[k8s:io.cilium.k8s.policy.derived-from=CiliumNetworkPolicy,k8s:io.cilium.k8s.policy.name=[^,]+,k8s:io.cilium.k8s.policy.namespace=[xyz]\], revision: \d+, count: [1-9]`),
		regexp.MustCompile(`POLICY_DELETED \(labels: \[k8s:io.cilium.k8s.policy.derived-from=NetworkPolicy,`),
	} {
		if !want.MatchString(all.String()) {
			t.Errorf("hubble observe agent-events shows no line like %s:\n%s", want, all.String())
		}
	}
}

// hubbleMetricsCounted: the agents' Hubble metrics (:9965) counted the
// matrix's flows, the policy drops with the pods they were between.
func hubbleMetricsCounted(t *testing.T, lab *Lab) {
	t.Helper()
	var all strings.Builder
	for _, node := range []string{lab.Name + "-node1", lab.Name + "-node2"} {
		code, body, err := agentProbe(agentPID(t, node), 9965, "/metrics")
		if err != nil || code != http.StatusOK {
			t.Fatalf("hubble metrics of %s: %d %v\n%s", node, code, err, body)
		}
		all.WriteString(body)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`hubble_drop_total\{destination="[xyz]/[abc]",protocol="TCP",reason="POLICY_DEN(Y|IED)",source="[xyz]/[abc]"\} [1-9]`),
		regexp.MustCompile(`hubble_flows_processed_total\{protocol="TCP",subtype="to-endpoint",type="Trace",verdict="FORWARDED"\} [1-9]`),
		regexp.MustCompile(`hubble_policy_verdicts_total\{action="forwarded",destination="[^"]+",direction="ingress",match="none",source="[^"]+"\} [1-9]`),
		regexp.MustCompile(`hubble_tcp_flags_total\{family="IPv4",flag="SYN-ACK"\} [1-9]`),
		regexp.MustCompile(`hubble_port_distribution_total\{port="80",protocol="TCP"\} [1-9]`),
	} {
		if !want.MatchString(all.String()) {
			t.Errorf("hubble metrics have no line like %s", want)
		}
	}
}

// datapathMetricsCounted: the agents' metrics (:9962) carry the
// datapath's packet counters under Cilium's names and labels, which
// dashboards and cilium-cli's connectivity test read: the matrix's
// forwarded packets, and its policy drops with Cilium's reason text.
func datapathMetricsCounted(t *testing.T, lab *Lab) {
	t.Helper()
	var all strings.Builder
	for _, node := range []string{lab.Name + "-node1", lab.Name + "-node2"} {
		code, body, err := agentProbe(agentPID(t, node), 9962, "/metrics")
		if err != nil || code != http.StatusOK {
			t.Fatalf("metrics of %s: %d %v\n%s", node, code, err, body)
		}
		all.WriteString(body)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`cilium_forward_count_total\{direction="EGRESS"\} [1-9]`),
		regexp.MustCompile(`cilium_forward_count_total\{direction="INGRESS"\} [1-9]`),
		regexp.MustCompile(`cilium_forward_bytes_total\{direction="INGRESS"\} [1-9]`),
		regexp.MustCompile(`cilium_drop_count_total\{direction="INGRESS",reason="Policy denied"\} [1-9]`),
	} {
		if !want.MatchString(all.String()) {
			t.Errorf("agent metrics have no line like %s", want)
		}
	}
}

// relayKeepsServing: the relay serves both nodes' flows; when one
// node's agent stops answering (SIGSTOP: its connections stay open, as
// when a machine hangs), the relay names it unavailable and goes on
// serving the other; once it answers again, both are back.
func relayKeepsServing(t *testing.T, lab *Lab) {
	t.Helper()
	n1, n2 := lab.Name+"-node1", lab.Name+"-node2"
	nodesAre := func(want ...string) func() error {
		return func() error {
			out, err := lab.hubble("list", "nodes")
			if err != nil {
				return fmt.Errorf("hubble list nodes: %w\n%s", err, out)
			}
			for _, w := range want {
				if !regexp.MustCompile(`(?m)^` + w).MatchString(out) {
					return fmt.Errorf("hubble list nodes shows no %q:\n%s", w, out)
				}
			}
			return nil
		}
	}
	lab.Eventually("the relay connected to both nodes", time.Minute, nodesAre(n1+` +Connected`, n2+` +Connected`))
	lab.Eventually("flows of both nodes through the relay", 30*time.Second, func() error {
		out, err := lab.hubble("observe", "--last", "1000", "-o", "json")
		if err != nil {
			return fmt.Errorf("hubble observe: %w\n%s", err, out)
		}
		for _, n := range []string{n1, n2} {
			if !strings.Contains(out, `"node_name":"`+n+`"`) {
				return fmt.Errorf("no flow of %s through the relay", n)
			}
		}
		return nil
	})

	pid := agentPID(t, n2)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	lab.Eventually("the relay naming the stopped node unavailable", time.Minute, nodesAre(n1+` +Connected`, n2+` +Unavailable`))
	lab.Eventually("the other node's flows while one is away", 30*time.Second, func() error {
		out, err := lab.hubble("observe", "--last", "20")
		if err != nil {
			return fmt.Errorf("hubble observe: %w\n%s", err, out)
		}
		if !strings.Contains(out, "1 nodes are unavailable: "+n2) || !strings.Contains(out, "FORWARDED") {
			return fmt.Errorf("hubble observe with %s away:\n%s", n2, out)
		}
		return nil
	})
	resume()
	lab.Eventually("the relay connected to both nodes again", time.Minute, nodesAre(n1+` +Connected`, n2+` +Connected`))
}

// checkMatrix probes until the matrix is as expected, and fails the test
// with both tables when it does not get there.
func checkMatrix(t *testing.T, name string, pods []*matrixPod, want expectation) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := probeAll(pods, allProbeKinds, time.Second)
		diff := mismatch(pods, allProbeKinds, want, got)
		if diff == "" {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: the matrix is not as expected:%s", name, diff)
			return false
		}
	}
}

// policyCondition checks the Valid condition of a CiliumNetworkPolicy:
// its status and that its message holds msg.
func policyCondition(ns, name, status, msg string) func(l *Lab) error {
	return func(l *Lab) error {
		out, err := l.run("kubectl", "-n", ns, "get", "ciliumnetworkpolicy", name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].message}`)
		if err != nil {
			return fmt.Errorf("%s/%s: %w: %s", ns, name, err, out)
		}
		got, message, _ := strings.Cut(out, " ")
		if got != status || !strings.Contains(message, msg) {
			return fmt.Errorf("%s/%s Valid is %q (%q), want %s naming %q", ns, name, got, message, status, msg)
		}
		return nil
	}
}

// relayAddress is where the lab's hubble-relay serves, as seen from a
// node: cilium-lab up writes it (its Service's ClusterIP and port when
// cilium-go runs as pods, the first node's relay process otherwise).
func (l *Lab) relayAddress() string {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.StateDir, "hubble-relay"))
	if err != nil {
		l.t.Fatalf("the relay's address: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// relayFlags are how the hubble CLI reaches the lab's relay, which wants
// mutual TLS: the relay's name, the Hubble CA and the client certificate
// issued to the CLI, which cilium-lab up leaves in <state>/pki/hubble.
func (l *Lab) relayFlags() []string {
	dir := filepath.Join(l.StateDir, "pki", "hubble")
	return []string{"--server", l.relayAddress(), "--tls", "--tls-server-name", "hubble.hubble-relay.cilium.io",
		"--tls-ca-cert-files", filepath.Join(dir, "ca.crt"),
		"--tls-client-cert-file", filepath.Join(dir, "cli.crt"), "--tls-client-key-file", filepath.Join(dir, "cli.key")}
}

// hubble runs the hubble CLI against the lab's relay, as a user on the
// first node would.
func (l *Lab) hubble(args ...string) (string, error) {
	return l.run("cilium-lab", append([]string{"exec", "--state-dir", l.StateDir, l.Name + "-node1", "--",
		filepath.Join(*binDir, "hubble")}, append(args, l.relayFlags()...)...)...)
}

// hubbleShows runs hubble observe with filter through the relay, which
// asks every node, and checks that one flow's line holds every one of
// want: the matrix's probes made the flows.
func hubbleShows(filter []string, want ...string) func(l *Lab) error {
	return func(l *Lab) error {
		out, err := l.hubble(append([]string{"observe", "--last", "1000", "--print-policy-names"}, filter...)...)
		if err != nil {
			return fmt.Errorf("hubble observe through the relay: %w\n%s", err, out)
		}
		lines := strings.Split(out, "\n")
		for _, line := range lines {
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(line, w) }) {
				return nil
			}
		}
		return fmt.Errorf("hubble observe %v shows no flow with %q; it shows\n%s", filter, want, out)
	}
}

// trace runs cilium-dbg policy trace on the first node and checks that
// its output holds every one of want.
func trace(l *Lab, src, dst string, want ...string) error {
	out, err := l.dbg(l.Name+"-node1", "policy", "trace", "--src", src, "--dst", dst, "--dport", "80/tcp")
	if err != nil {
		return fmt.Errorf("policy trace %s -> %s: %w\n%s", src, dst, err, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			return fmt.Errorf("policy trace %s -> %s says\n%s\nwant %q in it", src, dst, out, w)
		}
	}
	return nil
}
