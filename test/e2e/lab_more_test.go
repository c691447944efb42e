package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPrivilegedLabKubeProxyNftables runs kube-proxy in nftables mode: a ClusterIP Service and
// cluster DNS work through it.
func TestPrivilegedLabKubeProxyNftables(t *testing.T) {
	lab := StartLab(t, "e2enft", "--nodes", "1", "--kube-proxy=nftables")
	lab.KubectlApply(smokeManifest)
	lab.Kubectl("rollout", "status", "deployment/echo", "--timeout=180s")
	var pods podList
	lab.KubectlJSON(&pods, "get", "pods", "-l", "app=echo")
	client := pods.Items[0].Metadata.Name
	lab.Eventually("the Service answers through nftables", time.Minute, func() error {
		_, err := lab.run("kubectl", "exec", client, "--", "/agnhost", "connect", "echo.default.svc.cluster.local:80", "--timeout=3s")
		return err
	})
	out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, "e2enft-node1", "--", "nft", "list", "tables")
	if err != nil || !strings.Contains(out, "kube-proxy") {
		t.Errorf("no kube-proxy nftables table on the node: %v\n%s", err, out)
	}
}

const workloadManifest = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {greeting: hello-from-configmap}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: volumes}
spec:
  restartPolicy: Never
  initContainers:
  - name: init
    image: busybox
    command: ["sh", "-c", "echo from-init > /shared/init.txt"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  containers:
  - name: main
    image: ` + agnhost + `
    args: ["pause"]
    env:
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: settings, key: greeting}}}
    volumeMounts:
    - {name: shared, mountPath: /shared}
    - {name: config, mountPath: /etc/settings}
    - {name: secret, mountPath: /etc/creds, readOnly: true}
  - name: sidecar
    image: busybox
    command: ["sh", "-c", "echo from-sidecar > /shared/sidecar.txt; exec sleep 3600"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  volumes:
  - {name: shared, emptyDir: {}}
  - {name: config, configMap: {name: settings}}
  - {name: secret, secret: {secretName: creds}}
---
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  containers:
  - name: c
    image: ` + agnhost + `
    args: ["netexec", "--http-port=18080"]
---
apiVersion: v1
kind: Pod
metadata: {name: crasher}
spec:
  restartPolicy: Always
  containers:
  - name: crash
    image: busybox
    command: ["sh", "-c", "echo crashing; exit 3"]
`

// TestPrivilegedLabWorkloads checks what ordinary workloads rely on: volumes of every common kind,
// init containers, shared pod namespaces, downward-API and ConfigMap env, the service
// account token, in-cluster API access and restarts.
func TestPrivilegedLabWorkloads(t *testing.T) {
	lab := StartLab(t, "e2ewl", "--nodes", "1")
	lab.KubectlApply(workloadManifest)
	lab.Kubectl("wait", "--for=condition=Ready", "pod/volumes", "--timeout=120s")

	exec := func(args ...string) string {
		t.Helper()
		return strings.TrimSpace(lab.Kubectl(append([]string{"exec", "volumes", "-c", "main", "--"}, args...)...))
	}
	lab.Eventually("the sidecar's file in the shared emptyDir", 30*time.Second, func() error {
		if got := exec("cat", "/shared/sidecar.txt"); got != "from-sidecar" {
			return fmt.Errorf("got %q", got)
		}
		return nil
	})
	for file, want := range map[string]string{
		"/shared/init.txt":       "from-init",
		"/etc/settings/greeting": "hello-from-configmap",
		"/etc/creds/password":    "s3cret",
		"/etc/hostname":          "volumes",
	} {
		if got := exec("cat", file); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	var pod struct {
		Status struct {
			PodIP string `json:"podIP"`
		} `json:"status"`
	}
	lab.KubectlJSON(&pod, "get", "pod", "volumes")
	env := exec("env")
	for _, want := range []string{"POD_IP=" + pod.Status.PodIP, "NODE=e2ewl-node1", "GREETING=hello-from-configmap", "KUBERNETES_SERVICE_HOST=10.96.0.1"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	// The projected service-account token authenticates the pod to the API server.
	token := exec("cat", "/var/run/secrets/kubernetes.io/serviceaccount/token")
	if strings.Count(token, ".") != 2 {
		t.Errorf("service-account token is not a JWT: %q", token)
	}
	if _, err := lab.run("kubectl", "exec", "volumes", "-c", "main", "--", "/agnhost", "connect", "kubernetes.default.svc.cluster.local:443", "--timeout=5s"); err != nil {
		t.Errorf("the pod cannot reach the API server through its Service: %v", err)
	}
	// Exit codes come back through kubectl exec.
	if _, err := lab.run("kubectl", "exec", "volumes", "-c", "main", "--", "sh", "-c", "exit 7"); err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Errorf("exit code of exec: %v, want exit status 7", err)
	}

	// A hostNetwork pod lives in the node's network and UTS namespaces.
	lab.Kubectl("wait", "--for=condition=Ready", "pod/hostnet", "--timeout=60s")
	lab.KubectlJSON(&pod, "get", "pod", "hostnet")
	if pod.Status.PodIP != "172.30.0.11" {
		t.Errorf("hostNetwork pod IP %s, want the node's 172.30.0.11", pod.Status.PodIP)
	}
	if h := strings.TrimSpace(lab.Kubectl("exec", "hostnet", "--", "hostname")); h != "e2ewl-node1" {
		t.Errorf("hostNetwork pod hostname %q, want the node's", h)
	}
	if _, err := lab.run("kubectl", "exec", "volumes", "-c", "main", "--", "/agnhost", "connect", "172.30.0.11:18080", "--timeout=5s"); err != nil {
		t.Errorf("a pod cannot reach the hostNetwork server on its node: %v", err)
	}

	lab.Eventually("the crashing container restarts", 90*time.Second, func() error {
		var p struct {
			Status struct {
				ContainerStatuses []struct {
					RestartCount int `json:"restartCount"`
				} `json:"containerStatuses"`
			} `json:"status"`
		}
		lab.KubectlJSON(&p, "get", "pod", "crasher")
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 2 {
			return fmt.Errorf("status %+v", p.Status)
		}
		return nil
	})
	if logs := lab.Kubectl("logs", "crasher", "--previous"); !strings.Contains(logs, "crashing") {
		t.Errorf("previous logs: %q", logs)
	}

	lab.Kubectl("delete", "pod", "volumes", "--wait=true", "--timeout=60s")
}

// TestPrivilegedLabDownAfterCrash kills the lab's supervisor with SIGKILL, as a crash would, and
// checks that down still removes everything.
func TestPrivilegedLabDownAfterCrash(t *testing.T) {
	lab := StartLab(t, "e2ecr", "--nodes", "1")
	b, err := os.ReadFile(lab.StateDir + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), `"pid": `)
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b[i+7:]), ",", 2)[0]))
	if err != nil {
		t.Fatalf("supervisor pid in %s: %v", b, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// down (in cleanup) must now remove everything, and the leftovers check proves it.
}
