package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cilium-go/cilium/lab/internal/plan"
)

// The lab applies the repository's Kustomization whole, with its values.
func TestInstallWithLabValues(t *testing.T) {
	objs, err := readInstall(filepath.Join("..", "..", "..", "install", "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	o := plan.DefaultOptions()
	o.InstallDir, o.CiliumAs = "/src/install/kubernetes", plan.CiliumAsPods
	p, err := plan.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := labValues(p, objs); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
		switch {
		case u.GetKind() == "ConfigMap" && u.GetName() == ciliumConfigMap:
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			for k, want := range map[string]string{"cluster-pool-ipv4-cidr": "10.244.0.0/16", "cluster-pool-ipv4-mask-size": "24",
				"routing-mode": "tunnel", "kube-proxy-replacement": "true", "enable-host-legacy-routing": "false",
				"cgroup-root": nodeCgroupRoot, "hubble-metrics": labHubbleMetrics} {
				if data[k] != want {
					t.Errorf("cilium-config %s = %q, want %q", k, data[k], want)
				}
			}
		case u.GetKind() == "DaemonSet" && u.GetName() == agentDaemonSet || u.GetKind() == "Deployment" && u.GetName() == operatorDeployment:
			ctrs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			env := ctrs[0].(map[string]any)["env"].([]any)
			var got []string
			for _, e := range env {
				m := e.(map[string]any)
				if strings.HasPrefix(m["name"].(string), "KUBERNETES_SERVICE_") {
					got = append(got, m["name"].(string)+"="+m["value"].(string))
				}
			}
			if strings.Join(got, " ") != "KUBERNETES_SERVICE_HOST=172.30.0.2 KUBERNETES_SERVICE_PORT=6443" {
				t.Errorf("%s %s: API server env %v", u.GetKind(), u.GetName(), got)
			}
		}
	}
	if kinds["CustomResourceDefinition"] == 0 || kinds["DaemonSet"] != 2 || kinds["Deployment"] != 3 || kinds["Service"] != 3 {
		t.Errorf("objects by kind %v: want the CRDs, the agent's and the proxy's DaemonSets, the operator, relay and UI Deployments and their Services", kinds)
	}
}

func TestReadInstallRefusesResourcesOutsideTheDirectory(t *testing.T) {
	dir := t.TempDir()
	k := "resources:\n  - ../secret.yaml\n"
	if err := os.WriteFile(filepath.Join(dir, "Kustomization"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readInstall(dir); err == nil || !strings.Contains(err.Error(), `"../secret.yaml" is outside`) {
		t.Fatalf("error %v, want one naming the resource outside the directory", err)
	}
}
