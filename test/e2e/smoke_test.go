package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66"

const smokeManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
  namespace: default
spec:
  replicas: 4
  selector:
    matchLabels: {app: echo}
  template:
    metadata:
      labels: {app: echo}
    spec:
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels: {app: echo}
      containers:
      - name: echo
        image: ` + agnhost + `
        args: ["netexec", "--http-port=8080"]
        ports:
        - containerPort: 8080
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: echo
  namespace: default
spec:
  selector: {app: echo}
  ports:
  - port: 80
    targetPort: 8080
`

// TestPrivilegedSmokeLab is the lab's smoke test: a two-node cluster on the reference bridge
// plugins and kube-proxy, pods across nodes talking directly, through a ClusterIP
// Service and by DNS name, exec and logs, and a clean teardown.
func TestPrivilegedSmokeLab(t *testing.T) {
	lab := StartLab(t, "e2e", "--nodes", "2", "--cni=bridge", "--kube-proxy=iptables")

	var version struct {
		ServerVersion struct {
			GitVersion string `json:"gitVersion"`
		} `json:"serverVersion"`
	}
	if err := json.Unmarshal([]byte(lab.Kubectl("version", "-o", "json")), &version); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version.ServerVersion.GitVersion, "v1.37.") {
		t.Errorf("server version %q, want v1.37.x", version.ServerVersion.GitVersion)
	}

	var nodes nodeList
	lab.KubectlJSON(&nodes, "get", "nodes")
	if len(nodes.Items) != 2 {
		t.Fatalf("%d nodes, want 2", len(nodes.Items))
	}
	podCIDR := map[string]string{}
	for _, n := range nodes.Items {
		podCIDR[n.Metadata.Name] = n.Spec.PodCIDR
		if !strings.HasPrefix(n.Status.NodeInfo.KubeletVersion, "v1.37.") {
			t.Errorf("node %s reports version %q", n.Metadata.Name, n.Status.NodeInfo.KubeletVersion)
		}
		if !conditionTrue(n.Status.Conditions, "Ready") {
			t.Errorf("node %s is not Ready", n.Metadata.Name)
		}
	}

	lab.KubectlApply(smokeManifest)
	var pods podList
	lab.Eventually("4 echo pods Running and Ready on both nodes", 3*time.Minute, func() error {
		lab.KubectlJSON(&pods, "get", "pods", "-l", "app=echo")
		onNode := map[string]int{}
		for _, p := range pods.Items {
			if p.Status.Phase != "Running" || !conditionTrue(p.Status.Conditions, "Ready") || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s is %s", p.Metadata.Name, p.Status.Phase)
			}
			onNode[p.Spec.NodeName]++
		}
		if len(pods.Items) != 4 || len(onNode) != 2 {
			return fmt.Errorf("%d pods on nodes %v", len(pods.Items), onNode)
		}
		return nil
	})
	byNode := map[string][]string{} // node -> pod names
	ipOf := map[string]string{}
	for _, p := range pods.Items {
		if !inPrefix(podCIDR[p.Spec.NodeName], p.Status.PodIP) {
			t.Errorf("pod %s on %s has IP %s outside the node's pod CIDR %s",
				p.Metadata.Name, p.Spec.NodeName, p.Status.PodIP, podCIDR[p.Spec.NodeName])
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Metadata.Name)
		ipOf[p.Metadata.Name] = p.Status.PodIP
	}
	client := byNode["e2e-node1"][0]
	remote := byNode["e2e-node2"][0]

	connect := func(target string) {
		t.Helper()
		out, err := lab.run("kubectl", "exec", client, "--", "/agnhost", "connect", target, "--timeout=5s")
		if err != nil {
			t.Errorf("%s -> %s: %v\n%s", client, target, err, out)
		}
	}
	connect(ipOf[remote] + ":8080") // pod to pod across nodes
	var svc struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
		} `json:"spec"`
	}
	lab.KubectlJSON(&svc, "get", "service", "echo")
	lab.Eventually("the Service answers", time.Minute, func() error {
		_, err := lab.run("kubectl", "exec", client, "--", "/agnhost", "connect", svc.Spec.ClusterIP+":80", "--timeout=3s")
		return err
	})
	connect("echo.default.svc.cluster.local:80") // cluster DNS

	out := lab.Kubectl("exec", client, "--", "cat", "/etc/hostname")
	if strings.TrimSpace(out) != client {
		t.Errorf("pod %s sees hostname %q", client, out)
	}

	hosts := lab.Kubectl("exec", client, "--", "cat", "/etc/hosts")
	if !strings.Contains(hosts, ipOf[client]+"\t"+client) && !strings.Contains(hosts, ipOf[client]+" "+client) {
		t.Errorf("/etc/hosts of %s does not name its own IP %s:\n%s", client, ipOf[client], hosts)
	}

	// The node commands: exec runs on the node, status says all is well.
	if out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, "e2e-node2", "--", "hostname"); err != nil || strings.TrimSpace(out) != "e2e-node2" {
		t.Errorf("cilium-lab exec e2e-node2 -- hostname: %q %v", out, err)
	}
	// A pin in node 1's bpffs: down must take it away with the node.
	if out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, "e2e-node1", "--", "mkdir", "/sys/fs/bpf/e2e-pin"); err != nil {
		t.Errorf("mkdir in node bpffs: %v\n%s", err, out)
	}
	if out, err := lab.run("cilium-lab", "status", "--state-dir", lab.StateDir); err != nil {
		t.Errorf("cilium-lab status: %v\n%s", err, out)
	}

	lab.Eventually("kubectl logs shows the server's output", 30*time.Second, func() error {
		logs := lab.Kubectl("logs", remote)
		if !strings.Contains(logs, "8080") {
			return fmt.Errorf("logs of %s: %q", remote, logs)
		}
		return nil
	})
}

// KubectlApply applies a manifest from a string.
func (l *Lab) KubectlApply(manifest string) {
	l.t.Helper()
	f := l.t.TempDir() + "/manifest.yaml"
	if err := writeFile(f, manifest); err != nil {
		l.t.Fatal(err)
	}
	l.Kubectl("apply", "-f", f)
}

func conditionTrue(conds []struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == "True"
		}
	}
	return false
}
