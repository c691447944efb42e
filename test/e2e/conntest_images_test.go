package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// conntestManifest is what cilium-cli's connectivity test deploys (check/deployment.go),
// with its default images: the echo pod (json-mock with the CoreDNS DNS test server
// beside it), the client (alpine-curl running pause), the test-conn-disrupt servers
// behind their Service and the clients that hold connections to it, and the perf
// server (netserver) and client of `cilium connectivity perf`, and the l7-lb
// Deployment (Gateway API's echo-advanced, Istio's echo server) with the Service
// without the L7 annotation that pod-to-itself-via-service curls. The client and
// the perf client run on the other node than the echo and perf servers.
const conntestManifest = `apiVersion: v1
kind: Namespace
metadata: {name: cilium-test-1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns-configmap, namespace: cilium-test-1}
data:
  Corefile: |
    . {
    	local
    	ready
    	log
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo-same-node, namespace: cilium-test-1}
spec:
  selector: {matchLabels: {name: echo-same-node}}
  template:
    metadata: {labels: {name: echo-same-node, kind: echo}}
    spec:
      nodeSelector: {kubernetes.io/hostname: NODE1}
      containers:
      - name: echo-same-node
        image: quay.io/cilium/json-mock:v1.4.1@sha256:6a66df90808a39c02e7a9d58af7bf0e54d8f8b7d4bc528f48c891969a7049195
        ports: [{name: http-8080, containerPort: 8080}]
        env: [{name: PORT, value: "8080"}, {name: NAMED_PORT, value: http-8080}]
        readinessProbe: {httpGet: {path: /, port: 8080}}
      - name: dns-test-server
        image: registry.k8s.io/coredns/coredns:v1.14.6@sha256:900f9c109f7a33545d3c811516e8376df9019147b750f5ce3e254468769176ea
        args: ["-conf", "/etc/coredns/Corefile"]
        ports: [{name: dns-53, containerPort: 53}, {name: dns-udp-53, containerPort: 53, protocol: UDP}]
        readinessProbe: {httpGet: {path: /ready, port: 8181}}
        volumeMounts: [{name: coredns-config-volume, mountPath: /etc/coredns, readOnly: true}]
      volumes:
      - name: coredns-config-volume
        configMap: {name: coredns-configmap, items: [{key: Corefile, path: Corefile}]}
---
apiVersion: v1
kind: Service
metadata: {name: echo-same-node, namespace: cilium-test-1}
spec:
  selector: {name: echo-same-node}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: client, namespace: cilium-test-1}
spec:
  selector: {matchLabels: {name: client}}
  template:
    metadata: {labels: {name: client, kind: client}}
    spec:
      nodeSelector: {kubernetes.io/hostname: NODE2}
      containers:
      - name: client
        image: quay.io/cilium/alpine-curl:v1.10.0@sha256:913e8c9f3d960dde03882defa0edd3a919d529c2eb167caa7f54194528bde364
        command: ["/usr/bin/pause"]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: test-conn-disrupt-server, namespace: cilium-test-1}
spec:
  replicas: 2
  selector: {matchLabels: {app: test-conn-disrupt-server}}
  template:
    metadata: {labels: {app: test-conn-disrupt-server, kind: test-conn-disrupt}}
    spec:
      containers:
      - name: test-conn-disrupt-server
        image: quay.io/cilium/test-connection-disruption:v0.0.17@sha256:62374cfd0e87e6541244331ccf477a21c527c3eefa9d841b97af79996939be0c
        command: ["tcd-server", "8000"]
        ports: [{name: port-8000, containerPort: 8000}]
        readinessProbe: {exec: {command: ["cat", "/tmp/server-ready"]}, periodSeconds: 3, initialDelaySeconds: 1, failureThreshold: 20}
---
apiVersion: v1
kind: Service
metadata: {name: test-conn-disrupt, namespace: cilium-test-1}
spec:
  selector: {app: test-conn-disrupt-server}
  ports: [{name: http, port: 8000}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: test-conn-disrupt-client, namespace: cilium-test-1}
spec:
  replicas: 2
  selector: {matchLabels: {app: test-conn-disrupt-client}}
  template:
    metadata: {labels: {app: test-conn-disrupt-client, kind: test-conn-disrupt}}
    spec:
      containers:
      - name: test-conn-disrupt-client
        image: quay.io/cilium/test-connection-disruption:v0.0.17@sha256:62374cfd0e87e6541244331ccf477a21c527c3eefa9d841b97af79996939be0c
        command: ["tcd-client", "--dispatch-interval", "0s", "test-conn-disrupt.cilium-test-1.svc.cluster.local.:8000"]
        readinessProbe: {exec: {command: ["cat", "/tmp/client-ready"]}, periodSeconds: 3, initialDelaySeconds: 1, failureThreshold: 20}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: perf-server, namespace: cilium-test-1}
spec:
  selector: {matchLabels: {name: perf-server}}
  template:
    metadata: {labels: {name: perf-server}}
    spec:
      nodeSelector: {kubernetes.io/hostname: NODE1}
      terminationGracePeriodSeconds: 1
      containers:
      - name: perf-server
        image: quay.io/cilium/network-perf:3.21-1782913202-88c270c@sha256:c115a00b80bbf4ff49857dd545f0c40025f226d79051b2c8fdab3e8b938c7f92
        command: ["netserver", "-D"]
        ports: [{name: netserver-ctrl, containerPort: 12865}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: perf-client, namespace: cilium-test-1}
spec:
  selector: {matchLabels: {name: perf-client}}
  template:
    metadata: {labels: {name: perf-client}}
    spec:
      nodeSelector: {kubernetes.io/hostname: NODE2}
      terminationGracePeriodSeconds: 1
      containers:
      - name: perf-client
        image: quay.io/cilium/network-perf:3.21-1782913202-88c270c@sha256:c115a00b80bbf4ff49857dd545f0c40025f226d79051b2c8fdab3e8b938c7f92
        command: ["/bin/bash", "-c", "sleep 10000000"]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: l7-lb, namespace: cilium-test-1}
spec:
  selector: {matchLabels: {name: l7-lb}}
  template:
    metadata: {labels: {name: l7-lb, kind: l7-lb}}
    spec:
      nodeSelector: {kubernetes.io/hostname: NODE1}
      containers:
      - name: l7-lb
        image: gcr.io/k8s-staging-gateway-api/echo-advanced:v20251204-v1.4.1
        args: ["--tcp=9090", "--port=8080", "--grpc=7070", "--port=8443", "--tls=8443", "--crt=/cert.crt", "--key=/cert.key"]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: l7-lb-non-l7, namespace: cilium-test-1}
spec:
  selector: {name: l7-lb}
  ports: [{name: http, port: 8080}]
`

// TestPrivilegedLabConnectivityTestImages runs those workloads on a two-node
// cilium-go lab and what the suite runs in them, across nodes and through a
// Service: curl with its -w format, /client-ip (no SNAT between pods), nslookup
// against the DNS test server and of a Service, ping, netperf; then it kills
// both nodes' agents and checks, as the suite's no-interrupted-connections test
// does, that no test-conn-disrupt pod restarted: their connections held.
func TestPrivilegedLabConnectivityTestImages(t *testing.T) {
	lab := StartLab(t, "imgs", "--nodes", "2")
	node1, node2 := "imgs-node1", "imgs-node2"
	lab.KubectlApply(strings.NewReplacer("NODE1", node1, "NODE2", node2).Replace(conntestManifest))
	const ns = "cilium-test-1"
	lab.Kubectl("-n", ns, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=180s")

	var pods struct {
		Items []struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
			Status struct {
				PodIP             string `json:"podIP"`
				ContainerStatuses []struct {
					RestartCount int `json:"restartCount"`
				} `json:"containerStatuses"`
			} `json:"status"`
		} `json:"items"`
	}
	lab.KubectlJSON(&pods, "-n", ns, "get", "pods")
	name, ip := map[string]string{}, map[string]string{}
	for _, p := range pods.Items {
		if n := p.Metadata.Labels["name"]; n != "" {
			name[n], ip[n] = p.Metadata.Name, p.Status.PodIP
		}
	}
	in := func(pod string, argv ...string) (string, error) {
		return lab.run("kubectl", append([]string{"-n", ns, "exec", name[pod], "--"}, argv...)...)
	}
	echoIP, clientIP := ip["echo-same-node"], ip["client"]

	// CurlCommand, to the echo pod on the other node and to its Service by a
	// name with a trailing dot (and the Host header the suite adds for it).
	curl := []string{"curl", "--silent", "--fail", "--show-error", "--connect-timeout", "2", "--max-time", "10"}
	wform := []string{"-w", "%{local_ip}:%{local_port} -> %{remote_ip}:%{remote_port} = %{response_code}\n", "--output", "/dev/null"}
	out, err := in("client", append(append(curl, wform...), "http://"+echoIP+":8080/")...)
	if want := regexp.MustCompile(`^` + regexp.QuoteMeta(clientIP) + `:\d+ -> ` + regexp.QuoteMeta(echoIP) + `:8080 = 200\n$`); err != nil || !want.MatchString(out) {
		t.Errorf("curl the echo pod: %v %q", err, out)
	}
	svc := "echo-same-node." + ns + ".svc.cluster.local."
	out, err = in("client", append(curl, "-H", "Host: "+strings.TrimSuffix(svc, "."), "http://"+svc+":8080/client-ip")...)
	var got struct {
		ClientIP string `json:"client-ip"`
	}
	if err != nil || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("curl the echo Service's /client-ip: %v %q", err, out)
	}
	if a, err := netip.ParseAddr(got.ClientIP); err != nil || a.Unmap().String() != clientIP {
		t.Errorf("the echo pod saw the client as %q, want %s", got.ClientIP, clientIP)
	}
	// WaitForPodDNS and WaitForService.
	if out, err := in("client", "nslookup", "localhost", echoIP); err != nil {
		t.Errorf("nslookup localhost %s: %v\n%s", echoIP, err, out)
	}
	var service struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
		} `json:"spec"`
	}
	lab.KubectlJSON(&service, "-n", ns, "get", "service", "echo-same-node")
	if out, err := in("client", "nslookup", "echo-same-node"); err != nil || !strings.Contains(out, "Address: "+service.Spec.ClusterIP+"\n") {
		t.Errorf("nslookup echo-same-node: %v\n%s", err, out)
	}
	if out, err := in("client", "ping", "-c", "1", "-W", "2", echoIP); err != nil {
		t.Errorf("ping the echo pod: %v\n%s", err, out)
	}

	// pod-to-itself-via-service: the l7-lb pod curls its own Service's
	// ClusterIP (hairpin) and gets 200 from the echo server; its HTTPS port
	// answers with the certificate the stand-in made (curl -k, as the suite's).
	lab.KubectlJSON(&service, "-n", ns, "get", "service", "l7-lb-non-l7")
	out, err = in("l7-lb", append(append(curl, wform...), "http://"+service.Spec.ClusterIP+":8080")...)
	if want := regexp.MustCompile(`-> ` + regexp.QuoteMeta(service.Spec.ClusterIP) + `:8080 = 200\n$`); err != nil || !want.MatchString(out) {
		t.Errorf("curl l7-lb's own Service from l7-lb: %v %q", err, out)
	}
	out, err = in("l7-lb", append(curl, "-k", "https://"+ip["l7-lb"]+":8443/")...)
	if err != nil || !strings.Contains(out, "ServicePort=8443\n") || !strings.Contains(out, "StatusCode=200\n") {
		t.Errorf("curl l7-lb's HTTPS port: %v %q", err, out)
	}

	// The perf benchmark's command line, across nodes.
	out, err = in("perf-client", "/usr/local/bin/netperf", "-H", ip["perf-server"], "-l", "2s", "-t", "TCP_RR", "--", "-R", "1",
		"-o", "MIN_LATENCY,MEAN_LATENCY,MAX_LATENCY,P50_LATENCY,P90_LATENCY,P99_LATENCY,TRANSACTION_RATE,THROUGHPUT,THROUGHPUT_UNITS")
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" && l[0] >= '0' && l[0] <= '9' {
			row = strings.Split(l, ",")
		}
	}
	if rate, perr := strconv.ParseFloat(at(row, 6), 64); err != nil || len(row) != 9 || perr != nil || rate <= 0 {
		t.Errorf("netperf TCP_RR across nodes: %v\n%s", err, out)
	} else {
		t.Logf("netperf TCP_RR %s -> %s: %s transactions/s, p50 %sus, p99 %sus", node2, node1, row[6], row[3], row[5])
	}

	// The test-conn-disrupt clients hold their connections through the
	// Service while both agents die and come back.
	lab.Kubectl("-n", ns, "wait", "--for=condition=Ready", "pod", "-l", "kind=test-conn-disrupt", "--timeout=60s")
	restarts := func() map[string]int {
		lab.KubectlJSON(&pods, "-n", ns, "get", "pods", "-l", "kind=test-conn-disrupt")
		m := map[string]int{}
		for _, p := range pods.Items {
			m[p.Metadata.Name] = p.Status.ContainerStatuses[0].RestartCount
		}
		return m
	}
	before := restarts()
	for _, node := range []string{node1, node2} {
		pid := agentPID(t, node)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		lab.Eventually(node+"'s agent back and healthy", time.Minute, func() error {
			if p := agentPIDOrZero(node); p == 0 || p == pid {
				return fmt.Errorf("agent not restarted yet")
			}
			_, err := lab.dbg(node, "status")
			return err
		})
	}
	// tcd-client exits when a reply is 5s late: replies counted after that
	// long past the restarts mean the connections held.
	since := time.Now().Add(6 * time.Second).UTC().Format(time.RFC3339)
	replies := regexp.MustCompile(`rx [1-9]`)
	for pod := range before {
		if !strings.Contains(pod, "client") {
			continue
		}
		lab.Eventually(pod+" counting replies 6s after the agents' restart", time.Minute, func() error {
			out, err := lab.run("kubectl", "-n", ns, "logs", pod, "--since-time="+since)
			if err == nil && replies.MatchString(out) {
				return nil
			}
			// What the client said last, and its restarts, for whoever reads the failure.
			last, _ := lab.run("kubectl", "-n", ns, "logs", pod, "--tail=5")
			status, _ := lab.run("kubectl", "-n", ns, "get", "pod", pod, "-o", "jsonpath={.status.containerStatuses[0]}")
			return fmt.Errorf("no replies counted since %s yet (%v); last lines:\n%s\nstatus: %s", since, err, last, status) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		})
	}
	if after := restarts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("test-conn-disrupt restart counts went from %v to %v: a connection was interrupted", before, after)
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}
