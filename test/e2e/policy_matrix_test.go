package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// The policy tests' reachability matrix: namespaces x, y and z, each
// with pods a, b and c serving TCP and UDP on ports 80 and 81 (named
// container ports serve-80-tcp, serve-80-udp, ...), and a ClusterIP
// Service per pod. Every pod probes every pod on every port and protocol,
// by pod IP and by Service, from inside its network namespace. z/b
// carries forged namespace labels (forgedLabels).

var (
	matrixNamespaces = []string{"x", "y", "z"}
	matrixPodNames   = []string{"a", "b", "c"}
)

// matrixPod is a pod of the matrix.
type matrixPod struct {
	ns, name  string
	ip, svcIP string
	netns     string // /proc/PID/ns/net of one of its processes
}

func (p *matrixPod) String() string { return p.ns + "/" + p.name }

// probeKind is what a probe tries: a protocol and port, to the pod IP or
// to the pod's Service.
type probeKind struct {
	proto   string // tcp or udp
	port    int
	service bool
}

func (k probeKind) String() string {
	to := "pod IP"
	if k.service {
		to = "Service"
	}
	return fmt.Sprintf("%s/%d by %s", strings.ToUpper(k.proto), k.port, to)
}

var allProbeKinds = func() []probeKind {
	var out []probeKind
	for _, svc := range []bool{false, true} {
		for _, proto := range []string{"tcp", "udp"} {
			for _, port := range []int{80, 81} {
				out = append(out, probeKind{proto, port, svc})
			}
		}
	}
	return out
}()

// forgedLabels are z/b's own labels that claim what only the Namespace
// object may say: that its namespace is y, by both labels the policies'
// namespaceSelectors use. Every case expects z/b to be judged as a pod of
// z all the same.
const forgedLabels = `, io.cilium.k8s.namespace.labels.ns: "y", io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name: "y"`

// matrixManifest is the namespaces, pods and Services of the matrix.
func matrixManifest() string {
	var b strings.Builder
	for _, ns := range matrixNamespaces {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %q, labels: {ns: %q}}\n---\n", ns, ns)
		for _, pod := range matrixPodNames {
			labels := fmt.Sprintf("pod: %s", pod)
			if ns == "z" && pod == "b" {
				labels += forgedLabels
			}
			fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata: {name: %[2]s, namespace: "%[1]s", labels: {%[3]s}}
spec:
  containers:
`, ns, pod, labels)
			for _, port := range []int{80, 81} {
				fmt.Fprintf(&b, `  - name: cont-%[1]d
    image: %[2]s
    args: ["netexec", "--http-port=%[1]d", "--udp-port=%[1]d"]
    ports:
    - {name: serve-%[1]d-tcp, containerPort: %[1]d, protocol: TCP}
    - {name: serve-%[1]d-udp, containerPort: %[1]d, protocol: UDP}
`, port, agnhost)
			}
			fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata: {name: s-%[2]s, namespace: "%[1]s"}
spec:
  selector: {pod: %[2]s}
  ports:
  - {name: tcp-80, port: 80, protocol: TCP}
  - {name: tcp-81, port: 81, protocol: TCP}
  - {name: udp-80, port: 80, protocol: UDP}
  - {name: udp-81, port: 81, protocol: UDP}
---
`, ns, pod)
		}
	}
	return b.String()
}

// matrixPods waits for the matrix's pods and finds their addresses and
// network namespaces.
func matrixPods(l *Lab) []*matrixPod {
	l.t.Helper()
	var pods []*matrixPod
	for _, ns := range matrixNamespaces {
		for _, name := range matrixPodNames {
			pods = append(pods, &matrixPod{ns: ns, name: name})
		}
	}
	l.Eventually("the matrix's pods Ready", 3*time.Minute, func() error {
		for _, p := range pods {
			out, err := l.run("kubectl", "-n", p.ns, "get", "pod", p.name, "-o",
				`jsonpath={.status.podIP} {.status.conditions[?(@.type=="Ready")].status}`)
			if f := strings.Fields(out); err != nil || len(f) != 2 || f[1] != "True" {
				return fmt.Errorf("pod %s: %q %v", p, out, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
			}
			p.ip = strings.Fields(out)[0]
			svc, err := l.run("kubectl", "-n", p.ns, "get", "service", "s-"+p.name, "-o", "jsonpath={.spec.clusterIP}")
			if err != nil || svc == "" {
				return fmt.Errorf("service of %s: %q %v", p, svc, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
			}
			p.svcIP = svc
		}
		return nil
	})
	for _, p := range pods {
		ns, err := podNetNS(l, p.ip)
		if err != nil {
			l.t.Fatal(err)
		}
		p.netns = ns
	}
	return pods
}

// probe reports whether from reaches to as kind says.
func probe(from, to *matrixPod, kind probeKind, timeout time.Duration) bool {
	addr := to.ip
	if kind.service {
		addr = to.svcIP
	}
	target := net.JoinHostPort(addr, fmt.Sprint(kind.port))
	err := netnamespace.Do(from.netns, func() error {
		c, err := net.DialTimeout(kind.proto, target, timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		if kind.proto == "tcp" {
			return nil
		}
		// UDP answers only what reaches the server and comes back.
		if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		if _, err := c.Write([]byte("hostname")); err != nil {
			return err
		}
		buf := make([]byte, 256)
		_, err = c.Read(buf)
		return err
	})
	return err == nil
}

// reachability is a matrix of probe results: from, to, kind -> reached.
type reachability map[[3]string]bool

func key(from, to *matrixPod, kind probeKind) [3]string {
	return [3]string{from.String(), to.String(), kind.String()}
}

// probeAll runs every probe of kinds between every pair, a few at a time.
func probeAll(pods []*matrixPod, kinds []probeKind, timeout time.Duration) reachability {
	out := reachability{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 48)
	for _, from := range pods {
		for _, to := range pods {
			for _, kind := range kinds {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					ok := probe(from, to, kind, timeout)
					<-sem
					mu.Lock()
					out[key(from, to, kind)] = ok
					mu.Unlock()
				}()
			}
		}
	}
	wg.Wait()
	return out
}

// expectation says whether from should reach to as kind says.
type expectation func(from, to *matrixPod, kind probeKind) bool

// mismatch compares observed with want and prints, for each kind that
// differs, the expected and the observed table (. reached, X blocked;
// rows are sources, columns destinations), or returns "".
func mismatch(pods []*matrixPod, kinds []probeKind, want expectation, got reachability) string {
	var b strings.Builder
	for _, kind := range kinds {
		differ := slices.ContainsFunc(pods, func(from *matrixPod) bool {
			return slices.ContainsFunc(pods, func(to *matrixPod) bool { return want(from, to, kind) != got[key(from, to, kind)] })
		})
		if !differ {
			continue
		}
		fmt.Fprintf(&b, "\n%s: expected | observed\n", kind)
		header := ""
		for _, to := range pods {
			header += fmt.Sprintf("%4s", to)
		}
		fmt.Fprintf(&b, "%4s%s | %s\n", "", header, header)
		for _, from := range pods {
			var exp, obs string
			for _, to := range pods {
				exp += fmt.Sprintf("%4s", mark(want(from, to, kind)))
				m := mark(got[key(from, to, kind)])
				if want(from, to, kind) != got[key(from, to, kind)] {
					m = "!" + m
				}
				obs += fmt.Sprintf("%4s", m)
			}
			fmt.Fprintf(&b, "%4s%s | %s\n", from, exp, obs)
		}
	}
	return b.String()
}

func mark(reached bool) string {
	if reached {
		return "."
	}
	return "X"
}

// targetPort is where the servers outside the matrix listen.
const targetPort = 8099

// targets are servers outside the matrix: on the outside client and on
// each node, listening from the test's own process inside their network
// namespaces.
type targets struct {
	lab      *Lab
	pods     []*matrixPod
	outside  string
	nodes    map[string]string // node name -> address
	podNodes map[string]string // pod -> node name
}

func startTargets(t *testing.T, l *Lab, pods []*matrixPod) *targets {
	t.Helper()
	tg := &targets{lab: l, pods: pods, nodes: map[string]string{}, podNodes: map[string]string{}}
	var nodes nodeAddrList
	l.KubectlJSON(&nodes, "get", "nodes")
	tg.nodes = nodes.internalIPs()
	for _, p := range pods {
		tg.podNodes[p.String()] = strings.TrimSpace(l.Kubectl("-n", p.ns, "get", "pod", p.name, "-o", "jsonpath={.spec.nodeName}"))
	}
	files, _ := filepath.Glob("/run/netns/" + l.Name + "-*")
	for _, f := range files {
		addrs := netnsAddrs(t, f)
		if strings.HasSuffix(f, "-outside") && len(addrs) > 0 {
			tg.outside = addrs[0]
		}
		for _, ip := range tg.nodes {
			if slices.Contains(addrs, ip) || strings.HasSuffix(f, "-outside") {
				listen(t, f)
				break
			}
		}
	}
	if tg.outside == "" {
		t.Fatalf("no outside client among %v", files)
	}
	return tg
}

// netnsAddrs lists the IPv4 addresses in a network namespace.
func netnsAddrs(t *testing.T, path string) []string {
	var out []string
	err := netnamespace.Do(path, func() error {
		addrs, err := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				out = append(out, n.IP.String())
			}
		}
		return err
	})
	if err != nil {
		t.Fatalf("addresses in %s: %v", path, err)
	}
	return out
}

// listen accepts and closes connections on targetPort in a namespace
// until the test ends.
func listen(t *testing.T, path string) {
	var ln net.Listener
	err := netnamespace.Do(path, func() (err error) {
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", targetPort))
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", path, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// address resolves $outside, $node1, $node2, $host(ns/pod) (the pod's
// node) and $remote(ns/pod) (the other node).
func (tg *targets) address(name string) string {
	node := func(suffix string) string { return tg.nodes[tg.lab.Name+suffix] }
	switch {
	case name == "$outside":
		return tg.outside
	case name == "$node1", name == "$node2":
		return node("-" + name[1:])
	case strings.HasPrefix(name, "$host("):
		return tg.nodes[tg.podNodes[strings.TrimSuffix(strings.TrimPrefix(name, "$host("), ")")]]
	case strings.HasPrefix(name, "$remote("):
		own := tg.podNodes[strings.TrimSuffix(strings.TrimPrefix(name, "$remote("), ")")]
		for n, ip := range tg.nodes {
			if n != own {
				return ip
			}
		}
	}
	return ""
}

// expand replaces the addresses a case's manifest names.
func (tg *targets) expand(manifest string) string {
	pairs := []string{"$outside", tg.outside, "$node1", tg.address("$node1"), "$node2", tg.address("$node2")}
	for _, p := range tg.pods {
		pairs = append(pairs, "$"+p.String(), p.ip)
	}
	return strings.NewReplacer(pairs...).Replace(manifest)
}

// check probes each target until all are as wanted, or fails the test.
func (tg *targets) check(t *testing.T, name string, probes []outsideProbe) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var wrong []string
		for _, p := range probes {
			from := tg.pod(p.from)
			to, port, ok := strings.Cut(p.to, ":")
			if !ok {
				port = fmt.Sprint(targetPort)
			}
			target := net.JoinHostPort(tg.address(to), port)
			err := netnamespace.Do(from.netns, func() error {
				c, err := net.DialTimeout("tcp", target, time.Second)
				if err == nil {
					c.Close()
				}
				return err
			})
			if (err == nil) != p.want {
				wrong = append(wrong, fmt.Sprintf("%s -> %s (%s): reached %v, want %v", p.from, p.to, target, err == nil, p.want))
			}
		}
		if len(wrong) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %s", name, strings.Join(wrong, "; "))
			return false
		}
	}
}

func (tg *targets) pod(name string) *matrixPod {
	for _, p := range tg.pods {
		if p.String() == name {
			return p
		}
	}
	panic("no pod " + name)
}
