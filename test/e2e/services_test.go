package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// servicesManifest adds what the Service checks need beside the echo
// Deployment: a hostNetwork client on each node, a pod that reaches
// itself through its own Service, and a Service without endpoints.
const servicesManifest = `apiVersion: v1
kind: Pod
metadata:
  name: hostnet
  namespace: default
spec:
  hostNetwork: true
  containers:
  - name: agnhost
    image: ` + agnhost + `
    args: ["pause"]
---
apiVersion: v1
kind: Pod
metadata:
  name: hairpin
  namespace: default
  labels: {app: hairpin}
spec:
  containers:
  - name: agnhost
    image: ` + agnhost + `
    args: ["netexec", "--http-port=8080"]
---
apiVersion: v1
kind: Service
metadata:
  name: hairpin
  namespace: default
spec:
  selector: {app: hairpin}
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: v1
kind: Service
metadata:
  name: echo-nodeport
  namespace: default
spec:
  type: NodePort
  selector: {app: echo}
  ports:
  - {port: 80, targetPort: 8080, nodePort: 30080}
---
apiVersion: v1
kind: Service
metadata:
  name: echo-local
  namespace: default
spec:
  type: NodePort
  externalTrafficPolicy: Local
  selector: {app: echo}
  ports:
  - {port: 80, targetPort: 8080, nodePort: 30081}
---
apiVersion: v1
kind: Service
metadata:
  name: echo-external
  namespace: default
spec:
  selector: {app: echo}
  externalIPs: [203.0.113.10]
  ports:
  - {port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata:
  name: empty
  namespace: default
spec:
  selector: {app: nothing-has-this-label}
  ports:
  - port: 80
`

// lateService is made while an agent is down.
const lateService = `apiVersion: v1
kind: Service
metadata:
  name: late
  namespace: default
spec:
  selector: {app: echo}
  ports:
  - port: 80
    targetPort: 8080
`

// checkServices proves cilium-go's kube-proxy replacement in a lab that
// runs no kube-proxy: no kube-proxy rules on any node, and Services that
// answer from a pod (the echo Service, the API server's kubernetes
// Service), from a node's own process and from a hostNetwork pod (socket
// balancing in the node's cgroup), to a pod through its own Service
// (hairpin), and a Service without endpoints that refuses at once.
func checkServices(t *testing.T, lab *Lab, client echoPod, nodes ...string) {
	t.Helper()
	for _, node := range nodes {
		for _, tool := range [][]string{{"iptables-save"}, {"nft", "list", "ruleset"}} {
			out, _ := lab.run("cilium-lab", append([]string{"exec", "--state-dir", lab.StateDir, node, "--"}, tool...)...)
			if strings.Contains(out, "KUBE-") || strings.Contains(out, "kube-proxy") {
				t.Errorf("%s on %s shows kube-proxy's rules:\n%s", tool[0], node, out)
			}
		}
	}
	lab.KubectlApply(servicesManifest)
	echoIP := strings.TrimSpace(lab.Kubectl("get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}"))
	emptyIP := strings.TrimSpace(lab.Kubectl("get", "service", "empty", "-o", "jsonpath={.spec.clusterIP}"))

	lab.Eventually("the echo Service answers a pod", time.Minute, func() error {
		_, err := lab.run("kubectl", "exec", client.name, "--", "/agnhost", "connect", "echo:80", "--timeout=3s")
		return err
	})
	lab.connect(client.name, "echo.default.svc.cluster.local:80")
	lab.connect(client.name, "kubernetes.default.svc.cluster.local:443")
	// The backend sees the pod's own address, whichever backend it is.
	if out, err := lab.run("kubectl", "exec", client.name, "--", "curl", "-sS", "-m", "5", "http://"+echoIP+"/clientip"); err != nil ||
		!strings.HasPrefix(strings.TrimSpace(out), client.ip+":") {
		t.Errorf("%s -> echo's /clientip: %v %q, want its own address %s", client.name, err, out, client.ip)
	}

	// A node's own process, outside any pod.
	agnhost := filepath.Join(*binDir, "agnhost")
	if out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, client.node, "--",
		agnhost, "connect", echoIP+":80", "--timeout=5s"); err != nil {
		t.Errorf("%s's own process -> echo %s:80: %v\n%s", client.node, echoIP, err, out)
	}
	lab.Eventually("the hostNetwork and hairpin pods Ready", 2*time.Minute, func() error {
		for _, p := range []string{"hostnet", "hairpin"} {
			if _, err := lab.run("kubectl", "wait", "--for=condition=Ready", "pod/"+p, "--timeout=5s"); err != nil {
				return err
			}
		}
		return nil
	})
	lab.connect("hostnet", echoIP+":80")
	lab.connect("hostnet", "10.96.0.10:53")
	// Through its own Service, the hairpin pod is its only backend. (Its
	// own name is its hostname in /etc/hosts: the Service's is spelled
	// out.)
	lab.Eventually("the hairpin pod reaches itself through its Service", time.Minute, func() error {
		out, err := lab.run("kubectl", "exec", "hairpin", "--", "/agnhost", "connect", "hairpin.default.svc.cluster.local:80", "--timeout=3s")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})

	// No endpoints: refused, not a timeout (agnhost says which).
	for _, from := range []string{client.name, "hostnet"} {
		out, err := lab.run("kubectl", "exec", from, "--", "/agnhost", "connect", emptyIP+":80", "--timeout=10s")
		if err == nil || !strings.Contains(out, "REFUSED") {
			t.Errorf("%s -> the Service without endpoints: %v %q, want REFUSED", from, err, out)
		}
	}
	// Hubble, through the relay, names the Service of the pods' calls
	// that socket-level balancing translated, before (TRACED, to the
	// ClusterIP) and after (TRANSLATED, to a backend), and the calling
	// pod by its network namespace.
	lab.Eventually("hubble naming the Service of translated calls", 30*time.Second, func() error {
		out, err := lab.hubble("observe", "--last", "1000", "--type", "trace-sock", "--to-service", "default/echo", "-o", "json")
		if err != nil {
			return fmt.Errorf("hubble observe: %w\n%s", err, out)
		}
		for _, want := range []string{`"verdict":"TRACED"`, `"verdict":"TRANSLATED"`} {
			if !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
				return strings.Contains(line, want) && strings.Contains(line, `"IP":{"source":"`+client.ip+`"`) &&
					strings.Contains(line, `"destination_service":{"name":"echo","namespace":"default"}`)
			}) {
				return fmt.Errorf("no socket trace %s from %s to the Service echo:\n%s", want, client.name, out)
			}
		}
		return nil
	})
	if out, err := lab.dbg(client.node, "service", "list"); err != nil || !strings.Contains(out, echoIP+":80/TCP") {
		t.Errorf("cilium-dbg service list on %s: %v\n%s", client.node, err, out)
	}
	checkNodePorts(t, lab, nodes...)
	checkServiceEdges(t, lab, client, nodes[0], nodes[1])
	checkLoadBalancer(t, lab, client, nodes...)
	checkL2Announcement(t, lab, client)
}

// checkNodePorts connects from the lab's outside client, a machine on the
// underlay with no route to pods or Services, to the NodePorts of every
// node: with externalTrafficPolicy Cluster any backend answers, and with
// Local the node's own backend sees the client's address.
func checkNodePorts(t *testing.T, lab *Lab, nodes ...string) {
	t.Helper()
	var list nodeAddrList
	lab.KubectlJSON(&list, "get", "nodes")
	ips := list.internalIPs()
	var outsideIP string
	for _, node := range nodes {
		url := func(port int, path string) string { return fmt.Sprintf("http://%s:%d/%s", ips[node], port, path) }
		lab.Eventually("the NodePort of "+node+" answers the outside client", time.Minute, func() error {
			out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, "outside", "--",
				"curl", "-sS", "-m", "3", url(30080, "hostname"))
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
		out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, "outside", "--",
			"curl", "-sS", "-m", "3", url(30081, "clientip"))
		if err != nil {
			t.Errorf("outside -> %s's Local NodePort: %v: %s", node, err, out)
			continue
		}
		client, _, _ := strings.Cut(strings.TrimSpace(out), ":")
		if outsideIP == "" {
			outsideIP = client
		}
		if strings.HasPrefix(client, "10.") || client == ips[node] || client != outsideIP {
			t.Errorf("outside -> %s's Local NodePort: the backend saw %q, want the outside client's address", node, out)
		}
	}
	t.Logf("the outside client (%s) reached every node's NodePorts; with externalTrafficPolicy Local the backends saw its address", outsideIP)
	// Hubble, through the relay, names the Service the outside client's
	// connections went to, and the reply as coming from it.
	lab.Eventually("hubble naming the NodePort's Service", 30*time.Second, func() error {
		out, err := lab.hubble("observe", "--last", "1000", "--to-service", "default/echo-local", "-o", "json")
		if err != nil {
			return fmt.Errorf("hubble observe: %w\n%s", err, out)
		}
		if !strings.Contains(out, `"destination_service":{"name":"echo-local","namespace":"default"}`) ||
			!strings.Contains(out, `"IP":{"source":"`+outsideIP+`"`) {
			return fmt.Errorf("no flow from %s to the Service echo-local:\n%s", outsideIP, out)
		}
		return nil
	})

	// An ExternalIP, routed to the first node as a router outside the
	// cluster would.
	exec := func(args ...string) (string, error) {
		return lab.run("cilium-lab", append([]string{"exec", "--state-dir", lab.StateDir, "outside", "--"}, args...)...)
	}
	if out, err := exec("ip", "route", "replace", "203.0.113.10/32", "via", ips[nodes[0]]); err != nil {
		t.Fatalf("route the ExternalIP on the outside client: %v: %s", err, out)
	}
	lab.Eventually("the ExternalIP answers the outside client", time.Minute, func() error {
		out, err := exec("curl", "-sS", "-m", "3", "http://203.0.113.10/hostname")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
}

// hugeServiceRefusedAlone: a Service that needs more frontends than the
// service maps can hold (256 ports at 256 ExternalIPs and a ClusterIP:
// 65,792) is refused alone, with a ServiceRefused event, while the other
// Services keep working and a Service created meanwhile is programmed.
func hugeServiceRefusedAlone(t *testing.T, lab *Lab, client echoPod) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: huge, namespace: default}\nspec:\n  selector: {app: nobody}\n  externalIPs:\n")
	for i := range 256 {
		fmt.Fprintf(&b, "  - 198.18.%d.%d\n", (i+1)/256, (i+1)%256)
	}
	b.WriteString("  ports:\n")
	for i := range 256 {
		fmt.Fprintf(&b, "  - {name: p%d, port: %d, protocol: TCP}\n", i, 10000+i)
	}
	lab.KubectlApply(b.String())
	lab.Eventually("the huge Service refused", 2*time.Minute, func() error {
		out, err := lab.run("kubectl", "get", "events", "--field-selector", "involvedObject.name=huge,reason=ServiceRefused",
			"-o", "jsonpath={.items[*].message}")
		if err != nil || !strings.Contains(out, "refused") {
			return fmt.Errorf("no ServiceRefused event on the Service: %v %q", err, out) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
	lab.KubectlApply(`apiVersion: v1
kind: Service
metadata: {name: beside-huge, namespace: default}
spec:
  selector: {app: echo}
  ports: [{port: 80, targetPort: 8080}]
`)
	lab.connect(client.name, "echo.default.svc.cluster.local:80")
	lab.Eventually("a Service created beside the refused one answers", time.Minute, func() error {
		_, err := lab.run("kubectl", "exec", client.name, "--", "/agnhost", "connect", "beside-huge:80", "--timeout=3s")
		return err
	})
	if out, err := lab.dbg(client.node, "service", "list"); err != nil || strings.Contains(out, "198.18.0.1:10000") {
		t.Errorf("cilium-dbg service list on %s shows the refused Service: %v\n%s", client.node, err, out)
	}
	lab.Kubectl("delete", "service", "huge", "beside-huge")
}
