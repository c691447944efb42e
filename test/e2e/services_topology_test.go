package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// labZones are the smoke lab's zones: its first node is in the first,
// the second in the second (cilium-lab up --zones).
var labZones = []string{"zone-a", "zone-b"}

// zonedManifest is a Service that prefers close endpoints, with one
// backend pinned to each node: the EndpointSlice controller hints each
// for its node's zone.
func zonedManifest(node1, node2 string) string {
	pod := func(name, node string) string {
		return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: default
  labels: {app: zoned}
spec:
  nodeSelector: {kubernetes.io/hostname: ` + node + `}
  containers:
  - name: agnhost
    image: ` + agnhost + `
    args: ["netexec", "--http-port=8080"]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
---
`
	}
	return pod("zoned-a", node1) + pod("zoned-b", node2) + `apiVersion: v1
kind: Service
metadata:
  name: zoned
  namespace: default
spec:
  selector: {app: zoned}
  trafficDistribution: PreferClose
  ports:
  - port: 80
    targetPort: 8080
`
}

// checkTopology proves topology hints in a lab whose nodes are in
// labZones: kube-controller-manager hints the endpoints of a PreferClose
// Service for their zones, and a client in each zone reaches only its
// zone's backend, many times over; once the zone's backend goes, the
// client falls back to the other zone's.
func checkTopology(t *testing.T, lab *Lab, client echoPod, node1, node2 string) {
	t.Helper()
	lab.KubectlApply(zonedManifest(node1, node2))
	// The checks after this one count the pods and endpoints they made.
	defer func() {
		if out, err := lab.run("kubectl", "delete", "--wait=true", "--ignore-not-found", "service/zoned", "pod/zoned-a", "pod/zoned-b"); err != nil {
			t.Errorf("delete the zoned Service and pods: %v\n%s", err, out)
		}
	}()

	lab.Eventually("both zoned backends hinted for their zones", 2*time.Minute, func() error {
		var slices discoveryv1.EndpointSliceList
		lab.KubectlJSON(&slices, "get", "endpointslices", "-l", "kubernetes.io/service-name=zoned")
		hinted := map[string]string{}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				ready := e.Conditions.Ready == nil || *e.Conditions.Ready
				if e.Hints == nil || len(e.Hints.ForZones) != 1 || !ready || e.NodeName == nil {
					return fmt.Errorf("endpoint %v: ready %t, hints %+v", e.Addresses, ready, e.Hints)
				}
				hinted[*e.NodeName] = e.Hints.ForZones[0].Name
			}
		}
		if hinted[node1] != labZones[0] || hinted[node2] != labZones[1] {
			return fmt.Errorf("hints by node %v, want %s in %s and %s in %s", hinted, node1, labZones[0], node2, labZones[1])
		}
		return nil
	})
	zonedIP := strings.TrimSpace(lab.Kubectl("get", "service", "zoned", "-o", "jsonpath={.spec.clusterIP}"))

	// Each connection picks a backend anew: 12 answers from the zone's
	// backend alone, where two backends would serve, is no chance.
	const tries = 12
	fromPod := func() (string, error) {
		return lab.run("kubectl", "exec", client.name, "--", "curl", "-sS", "-m", "3", "http://"+zonedIP+"/hostname")
	}
	fromNode2 := func() (string, error) {
		return lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, node2, "--",
			"curl", "-sS", "-m", "3", "http://"+zonedIP+"/hostname")
	}
	only := func(what, want string, ask func() (string, error)) {
		t.Helper()
		lab.Eventually(what+" reaches "+want+" alone", time.Minute, func() error {
			for range tries {
				out, err := ask()
				if err != nil {
					return fmt.Errorf("%w: %s", err, out)
				}
				if got := strings.TrimSpace(out); got != want {
					return fmt.Errorf("answered by %q, want %s", got, want)
				}
			}
			return nil
		})
	}
	only(client.name+" in "+labZones[0], "zoned-a", fromPod)
	only(node2+" in "+labZones[1], "zoned-b", fromNode2)
	t.Logf("%d connections from each zone to the PreferClose Service %s stayed in the zone", tries, zonedIP)

	// zone-a's backend goes: no endpoint is for zone-a, so its clients
	// fall back to every endpoint, zone-b's.
	lab.Kubectl("delete", "pod", "zoned-a", "--wait=true")
	only(client.name+" in "+labZones[0]+" without a backend there", "zoned-b", fromPod)
}
