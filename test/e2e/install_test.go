package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestPrivilegedSmokeInstall is cilium-go installed the way users install
// it: cilium-lab up applies install/kubernetes and the nodes run the cilium
// DaemonSet, the operator and hubble-relay as pods, found by Cilium's
// labels. kubectl exec reaches the agent's socket, hubble reaches every node
// through the relay's Service with the certificate the operator issued,
// hubble-ui answers on the host's loopback, a
// rollout restart of the agents (an upgrade) loses no connection, and a
// deleted agent pod comes back.
func TestPrivilegedSmokeInstall(t *testing.T) {
	lab := StartLab(t, "e2einst", "--nodes", "2", "--cni=cilium", "--cilium-as=pods")
	node1, node2 := lab.Name+"-node1", lab.Name+"-node2"

	agents := lab.checkPods("k8s-app=cilium", 2, "cilium-agent", "install-cni")
	if agents[0].Spec.NodeName == agents[1].Spec.NodeName {
		t.Errorf("both agents on %s", agents[0].Spec.NodeName)
	}
	lab.checkPods("io.cilium/app=operator", 2, "cilium-operator", "")
	lab.checkPods("app.kubernetes.io/name=hubble-relay", 1, "hubble-relay", "")

	// kubectl exec into the agent reaches its socket, the node's.
	for _, cmd := range [][]string{{"cilium-dbg", "status"}, {"cilium", "status"}, {"test", "-S", "/var/run/cilium/cilium.sock"}} {
		out := lab.Kubectl(append([]string{"-n", "kube-system", "exec", "ds/cilium", "-c", "cilium-agent", "--"}, cmd...)...)
		t.Logf("kubectl exec ds/cilium -- %s:\n%s", strings.Join(cmd, " "), out)
	}
	if _, err := os.Stat(filepath.Join(*binDir, "cilium-health")); err == nil {
		out := lab.Kubectl("-n", "kube-system", "exec", "ds/cilium", "-c", "cilium-agent", "--", "cilium-health", "--help")
		t.Logf("kubectl exec ds/cilium -- cilium-health --help:\n%s", out)
	}

	// Both nodes through the relay's Service.
	lab.Eventually("both nodes connected through hubble-relay", time.Minute, func() error {
		out, err := lab.hubble("list", "nodes")
		if err != nil || strings.Count(out, "Connected") != 2 {
			return fmt.Errorf("%v\n%s", err, out) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})

	// hubble-ui from the host: the lab forwards a port of its loopback
	// to the hubble-ui Service.
	lab.checkPods("app.kubernetes.io/name=hubble-ui", 1, "hubble-ui", "")
	healthz := lab.hubbleUIURL() + "healthz"
	web := http.Client{Timeout: 5 * time.Second}
	lab.Eventually("GET "+healthz, time.Minute, func() error {
		resp, err := web.Get(healthz)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})

	lab.KubectlApply(smokeManifest)
	pods := echoPods(lab, 4)
	client, server := onNode(pods, node1)[0], onNode(pods, node2)[0]
	echoIP := strings.TrimSpace(lab.Kubectl("get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}"))

	// New connections every 50 ms, to a pod and through a Service, across
	// the rollout restart of every agent.
	targets := []string{server.ip + ":8080", echoIP + ":80"}
	var probes []*stream
	for _, to := range targets {
		probes = append(probes, lab.startClient(client.name, to, connectsClient))
	}
	started := time.Now()
	for i, p := range probes {
		lab.Eventually(targets[i]+": connections before the rollout", time.Minute, func() error {
			if !p.progressAfter(started) {
				return fmt.Errorf("none yet")
			}
			return nil
		})
	}
	restarted := time.Now()
	lab.Kubectl("-n", "kube-system", "rollout", "restart", "ds/cilium")
	lab.Kubectl("-n", "kube-system", "rollout", "status", "ds/cilium", "--timeout=3m")
	rolledOut := time.Now()
	fresh := lab.checkPods("k8s-app=cilium", 2, "cilium-agent", "install-cni")
	for _, a := range fresh {
		if slices.ContainsFunc(agents, func(old corev1.Pod) bool { return old.UID == a.UID }) {
			t.Errorf("agent pod %s was not replaced by the rollout", a.Name)
		}
	}
	until := rolledOut.Add(5 * time.Second)
	for i, p := range probes {
		lab.Eventually(targets[i]+": connections after the rollout", time.Minute, func() error {
			if !p.progressAfter(until) {
				return fmt.Errorf("none after %s yet", until.Format(time.TimeOnly))
			}
			return nil
		})
		sum := p.stop(t)
		t.Logf("%s -> %s across the rollout restart (%v): %d connections, one every %v, %d failed; longest gap %.0f ms",
			client.name, targets[i], rolledOut.Sub(restarted).Round(time.Millisecond), sum.OK+sum.Failed, streamInterval,
			sum.Failed, sum.Longest*1000)
		if sum.Failed > 0 {
			t.Errorf("%d connections to %s failed across the rollout restart: %s\n%s", sum.Failed, targets[i], sum.Error, p.output())
		}
		if first := fromUnix(sum.First); first.After(restarted) || fromUnix(sum.Last).Before(until) {
			t.Errorf("the connections to %s ran from %s to %s: they do not cover the rollout from %s to %s", targets[i],
				first.Format(time.TimeOnly), fromUnix(sum.Last).Format(time.TimeOnly), restarted.Format(time.TimeOnly), until.Format(time.TimeOnly))
		}
	}

	// A deleted agent pod comes back on its node.
	gone := fresh[0]
	lab.Kubectl("-n", "kube-system", "delete", "pod", gone.Name, "--wait=true")
	lab.Eventually("the agent pod replaced on "+gone.Spec.NodeName, 2*time.Minute, func() error {
		var list corev1.PodList
		lab.KubectlJSON(&list, "-n", "kube-system", "get", "pods", "-l", "k8s-app=cilium")
		for _, p := range list.Items {
			if p.Spec.NodeName == gone.Spec.NodeName && p.UID != gone.UID && podIsReady(&p) {
				return nil
			}
		}
		return fmt.Errorf("no new ready agent on %s", gone.Spec.NodeName)
	})
	lab.connect(client.name, server.ip+":8080")
	lab.connect(client.name, "echo.default.svc.cluster.local:80")
}

// checkPods finds the pods of selector in kube-system: want of them, Running
// and Ready, each with the one container named container and, if initName
// is not empty, that one init container.
func (l *Lab) checkPods(selector string, want int, container, initName string) []corev1.Pod {
	l.t.Helper()
	var list corev1.PodList
	l.Eventually(fmt.Sprintf("%d ready pods of %s", want, selector), 2*time.Minute, func() error {
		l.KubectlJSON(&list, "-n", "kube-system", "get", "pods", "-l", selector)
		ready := 0
		for i := range list.Items {
			p := &list.Items[i]
			if p.DeletionTimestamp == nil && podIsReady(p) {
				ready++
			}
		}
		if ready != want || len(list.Items) != want {
			return fmt.Errorf("%d pods, %d ready", len(list.Items), ready)
		}
		return nil
	})
	for _, p := range list.Items {
		var names, inits []string
		for _, c := range p.Spec.Containers {
			names = append(names, c.Name)
		}
		for _, c := range p.Spec.InitContainers {
			inits = append(inits, c.Name)
		}
		if !slices.Equal(names, []string{container}) {
			l.t.Errorf("pod %s: containers %v, want [%s]", p.Name, names, container)
		}
		if initName != "" && !slices.Equal(inits, []string{initName}) {
			l.t.Errorf("pod %s: init containers %v, want [%s]", p.Name, inits, initName)
		}
		if p.Status.Phase != corev1.PodRunning {
			l.t.Errorf("pod %s: phase %s", p.Name, p.Status.Phase)
		}
	}
	return list.Items
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// connectsClient opens a new connection every interval (connect, one
// request, close), and counts those that fail.
var connectsClient = loopClient(`
host, _, p = host.partition(":")
print("streaming new connections", flush=True)
`, `
c = http.client.HTTPConnection(host, int(p or 8080), timeout=2)
c.request("GET", "/hostname")
r = c.getresponse()
r.read()
c.close()
if r.status != 200:
    raise Exception("status %d" % r.status)
`, true)
