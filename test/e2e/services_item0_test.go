package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostNetworkManifest: a backend in each node's own network behind a
// NodePort Service, as Kubernetes' "should function for service endpoints
// using hostNetwork" makes them; a Service that carries the headless
// label, which kube-proxy (and so cilium-go) leaves alone; and three pods
// on one hostPort (Kubernetes' conformance test of hostPort with hostIP
// and protocol): at the loopback, at the node's address, and at the
// node's address over UDP. NODE1, NODE2 and NODE1IP are replaced.
const hostNetworkManifest = `apiVersion: v1
kind: Pod
metadata: {name: hostbe-1, namespace: default, labels: {app: hostbe}}
spec:
  hostNetwork: true
  nodeName: NODE1
  containers:
  - {name: agnhost, image: ` + agnhost + `, args: ["netexec", "--http-port=18080", "--udp-port=-1"]}
---
apiVersion: v1
kind: Pod
metadata: {name: hostbe-2, namespace: default, labels: {app: hostbe}}
spec:
  hostNetwork: true
  nodeName: NODE2
  containers:
  - {name: agnhost, image: ` + agnhost + `, args: ["netexec", "--http-port=18080", "--udp-port=-1"]}
---
apiVersion: v1
kind: Service
metadata: {name: hostbe, namespace: default}
spec:
  type: NodePort
  selector: {app: hostbe}
  ports:
  - {port: 80, targetPort: 18080, nodePort: 30090}
---
apiVersion: v1
kind: Service
metadata:
  name: labelled-headless
  namespace: default
  labels: {service.kubernetes.io/headless: ""}
spec:
  selector: {app: echo}
  ports:
  - {port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Pod
metadata: {name: hostport-lo, namespace: default}
spec:
  nodeName: NODE1
  containers:
  - name: agnhost
    image: ` + agnhost + `
    args: ["netexec", "--http-port=8080"]
    ports: [{containerPort: 8080, hostPort: 54323, hostIP: 127.0.0.1}]
---
apiVersion: v1
kind: Pod
metadata: {name: hostport-node, namespace: default}
spec:
  nodeName: NODE1
  containers:
  - name: agnhost
    image: ` + agnhost + `
    args: ["netexec", "--http-port=8080"]
    ports: [{containerPort: 8080, hostPort: 54323, hostIP: NODE1IP}]
---
apiVersion: v1
kind: Pod
metadata: {name: hostport-udp, namespace: default}
spec:
  nodeName: NODE1
  containers:
  - name: agnhost
    image: ` + agnhost + `
    args: ["netexec", "--http-port=8080", "--udp-port=8081"]
    ports: [{containerPort: 8081, hostPort: 54323, hostIP: NODE1IP, protocol: UDP}]
`

// checkServiceEdges proves the Service cases Kubernetes' own Service
// tests found broken: backends in the nodes' own networks reached
// through a NodePort and a ClusterIP from a pod, a node and the outside
// client, whichever node is called; a Service with the headless label
// left alone; and one hostPort used at the loopback, at the node's
// address and over UDP by three pods.
func checkServiceEdges(t *testing.T, lab *Lab, client echoPod, node1, node2 string) {
	t.Helper()
	var list nodeAddrList
	lab.KubectlJSON(&list, "get", "nodes")
	ips := list.internalIPs()
	lab.KubectlApply(strings.NewReplacer("NODE1IP", ips[node1], "NODE1", node1, "NODE2", node2).Replace(hostNetworkManifest))
	lab.Eventually("the hostNetwork and hostPort pods Ready", 2*time.Minute, func() error {
		for _, p := range []string{"hostbe-1", "hostbe-2", "hostport-lo", "hostport-node", "hostport-udp"} {
			if out, err := lab.run("kubectl", "wait", "--for=condition=Ready", "pod/"+p, "--timeout=5s"); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
		}
		return nil
	})
	clusterIP := strings.TrimSpace(lab.Kubectl("get", "service", "hostbe", "-o", "jsonpath={.spec.clusterIP}"))
	// What each backend answers to /hostname: its node's hostname.
	backends := map[string]bool{}
	for _, p := range []string{"hostbe-1", "hostbe-2"} {
		backends[strings.TrimSpace(lab.Kubectl("exec", p, "--", "hostname"))] = true
	}
	if len(backends) != 2 {
		t.Fatalf("the hostNetwork backends' hostnames %v: want two", backends)
	}
	onNodeOf := func(node string) func(...string) (string, error) {
		return func(args ...string) (string, error) {
			return lab.run("cilium-lab", append([]string{"exec", "--state-dir", lab.StateDir, node, "--"}, args...)...)
		}
	}
	callers := []struct {
		name string
		run  func(...string) (string, error)
	}{
		{"pod " + client.name + " on " + client.node, func(args ...string) (string, error) {
			return lab.run("kubectl", append([]string{"exec", client.name, "--"}, args...)...)
		}},
		{"a process of " + node2, onNodeOf(node2)},
		{"the outside client", onNodeOf(outsideClient)},
	}
	for _, c := range callers {
		targets := []string{ips[node1] + ":30090", ips[node2] + ":30090"}
		if !strings.HasPrefix(c.name, "the outside") {
			targets = append(targets, clusterIP+":80")
		}
		for _, target := range targets {
			// Both backends answer, each with its node's hostname.
			seen := map[string]bool{}
			for try := 0; try < 40 && len(seen) < len(backends); try++ {
				out, err := c.run("curl", "-sS", "-m", "3", "http://"+target+"/hostname")
				if err != nil {
					t.Errorf("%s -> %s (hostNetwork backends): %v: %s", c.name, target, err, out)
					break
				}
				seen[strings.TrimSpace(out)] = true
			}
			if !maps.Equal(seen, backends) {
				t.Errorf("%s -> %s: backends %v answered, want the hostNetwork ones %v", c.name, target, seen, backends)
			}
		}
	}

	// The labelled Service is in the API, not in the maps.
	headlessIP := strings.TrimSpace(lab.Kubectl("get", "service", "labelled-headless", "-o", "jsonpath={.spec.clusterIP}"))
	for _, node := range []string{node1, node2} {
		if out, err := lab.dbg(node, "service", "list"); err != nil || strings.Contains(out, headlessIP+":80") ||
			!strings.Contains(out, clusterIP+":80") {
			t.Errorf("cilium-dbg service list on %s: %v: want %s but not the headless-labelled %s:\n%s", node, err, clusterIP, headlessIP, out)
		}
	}

	// One hostPort, three pods, as the conformance test reaches them from
	// the node: the loopback (bound to the node's address, as its curl
	// --interface does), the node's address, and UDP.
	node := onNodeOf(node1)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"curl", "-sS", "-m", "5", "--interface", ips[node1], "http://127.0.0.1:54323/hostname"}, "hostport-lo"},
		{[]string{"curl", "-sS", "-m", "5", "http://" + ips[node1] + ":54323/hostname"}, "hostport-node"},
		{[]string{"sh", "-c", "echo hostname | nc -u -w 3 " + ips[node1] + " 54323"}, "hostport-udp"},
	} {
		lab.Eventually(c.want+" through its hostPort", time.Minute, func() error {
			out, err := node(c.args...)
			if err != nil {
				return fmt.Errorf("%v: %w: %s", c.args, err, out)
			}
			if strings.TrimSpace(out) != c.want {
				return fmt.Errorf("%v: %q, want %q", c.args, out, c.want)
			}
			return nil
		})
	}
	// A pod's own loopback stays its own: nothing listens there.
	if out, err := lab.run("kubectl", "exec", client.name, "--", "curl", "-sS", "-m", "3", "http://127.0.0.1:54323/hostname"); err == nil {
		t.Errorf("pod %s reached a hostPort at its own loopback: %s", client.name, out)
	}
	t.Logf("hostNetwork backends %v answered through both nodes' NodePorts and the ClusterIP, from a pod, a node and outside; "+
		"the headless-labelled Service was left alone; one hostPort served three pods at the loopback, the node's address and over UDP",
		slices.Sorted(maps.Keys(backends)))
}
