package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/cilium-go/cilium/lab/internal/apply"
	"github.com/cilium-go/cilium/lab/internal/pki"
	"github.com/cilium-go/cilium/lab/internal/plan"
)

// What install/kubernetes names, with Cilium's labels, which cilium-cli
// selects by.
const (
	agentDaemonSet     = "cilium"
	agentContainer     = "cilium-agent"
	agentSelector      = "k8s-app=cilium"
	operatorDeployment = "cilium-operator"
	relayDeployment    = "hubble-relay"
	ciliumConfigMap    = "cilium-config"
	hubbleCLISecret    = "hubble-cli-client-certs"
	// nodeCgroupRoot is Cilium's default --cgroup-root, where each lab node
	// binds its own cgroup, so that the agent's socket-level balancing
	// attaches to the node's processes, never the machine's.
	nodeCgroupRoot = "/run/cilium/cgroupv2"
)

// readInstall decodes the resources dir's Kustomization lists, in its order,
// as `kubectl apply -k dir` applies them.
func readInstall(dir string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(dir, "Kustomization"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s/Kustomization: %w", dir, err)
	}
	if len(k.Resources) == 0 {
		return nil, fmt.Errorf("%s/Kustomization lists no resources", dir)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		if filepath.IsAbs(r) || !filepath.IsLocal(r) {
			return nil, fmt.Errorf("%s/Kustomization: resource %q is outside the directory", dir, r)
		}
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			return nil, err
		}
		objs, err := apply.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// labValues fits the install to the lab the way a user fits Cilium's chart
// with values: the pod CIDRs and routing mode of the plan, Hubble's
// metrics with pod contexts, the flow exporter when asked, the kube-proxy
// replacement when the lab runs no kube-proxy, and the API server's address
// for the agents and operators (Cilium's k8sServiceHost: without kube-proxy
// the kubernetes Service works only once the agents run).
func labValues(p plan.Plan, objs []*unstructured.Unstructured) error {
	found := map[string]bool{}
	for _, u := range objs {
		switch {
		case u.GetKind() == "ConfigMap" && u.GetName() == ciliumConfigMap:
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			data["cluster-pool-ipv4-cidr"] = p.ClusterCIDR.String()
			data["cluster-pool-ipv4-mask-size"] = strconv.Itoa(p.NodeMask)
			data["routing-mode"] = p.RoutingMode
			data["hubble-metrics"] = labHubbleMetrics
			if p.HubbleExport {
				data["hubble-export-file-path"] = plan.HubbleExportFile
			}
			if p.KubeProxy == "none" {
				data["kube-proxy-replacement"] = "true"
				data["enable-host-legacy-routing"] = "false"
				// The lab's underlay is one L2 segment, where the
				// outside client reaches LoadBalancer addresses
				// that the nodes announce.
				data["enable-l2-announcements"] = "true"
				// Services may ask for Maglev (the e2e's do).
				data["bpf-lb-algorithm-annotation"] = "true"
			}
			if err := unstructured.SetNestedStringMap(u.Object, data, "data"); err != nil {
				return err
			}
			found[u.GetName()] = true
		case u.GetKind() == "DaemonSet" && u.GetName() == agentDaemonSet,
			u.GetKind() == "Deployment" && u.GetName() == operatorDeployment:
			if err := addEnv(u, map[string]string{
				"KUBERNETES_SERVICE_HOST": p.ControlPlaneIP.String(),
				"KUBERNETES_SERVICE_PORT": strconv.Itoa(p.APIPort),
			}); err != nil {
				return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
			found[u.GetName()] = true
		}
	}
	for _, want := range []string{ciliumConfigMap, agentDaemonSet, operatorDeployment} {
		if !found[want] {
			return fmt.Errorf("%s: no %s in kube-system", p.InstallDir, want)
		}
	}
	return nil
}

// addEnv sets env on every container of a workload's pod template.
func addEnv(u *unstructured.Unstructured, env map[string]string) error {
	ctrs, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return err
	}
	for i, c := range ctrs {
		m, ok := c.(map[string]any)
		if !ok {
			return errors.New("a container is not an object")
		}
		list, _ := m["env"].([]any)
		kept := list[:0:0]
		for _, e := range list {
			if em, ok := e.(map[string]any); ok && env[fmt.Sprint(em["name"])] != "" {
				continue
			}
			kept = append(kept, e)
		}
		for _, name := range []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
			if v, ok := env[name]; ok {
				kept = append(kept, map[string]any{"name": name, "value": v})
			}
		}
		m["env"] = kept
		ctrs[i] = m
	}
	return unstructured.SetNestedSlice(u.Object, ctrs, "spec", "template", "spec", "containers")
}

// installCilium applies install/kubernetes with the lab's values: the
// node agents then run the agent DaemonSet, the operator and hubble-relay
// as pods.
func installCilium(ctx context.Context, applier *apply.Applier, p plan.Plan) error {
	if err := bindNodeCgroups(p); err != nil {
		return err
	}
	objs, err := readInstall(p.InstallDir)
	if err != nil {
		return err
	}
	if err := labValues(p, objs); err != nil {
		return err
	}
	if err := retry(ctx, func() error { return applier.ApplyObjects(ctx, objs) }); err != nil {
		return fmt.Errorf("install cilium-go: %w", err)
	}
	return nil
}

// bindNodeCgroups binds each node's cgroup at nodeCgroupRoot inside the
// node, before an agent pod starts (the agent's /var/run/cilium volume
// carries it into the pod). Safe to repeat.
func bindNodeCgroups(p plan.Plan) error {
	for _, n := range p.Nodes {
		if n.Cgroup == "" {
			continue
		}
		script := `mkdir -p "$2" && { mountpoint -q "$2" || mount --bind "$1" "$2"; }`
		out, err := exec.Command("nsenter", "--mount="+n.MntNS, "--", "sh", "-ec", script, "sh", n.Cgroup, nodeCgroupRoot).CombinedOutput()
		if err != nil {
			return fmt.Errorf("node %s: bind its cgroup at %s: %w: %s", n.Name, nodeCgroupRoot, err, out)
		}
	}
	return nil
}

// daemonSetReady says whether every node runs an up-to-date, ready agent.
func daemonSetReady(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return rolledOut(ds)
}

func rolledOut(ds *appsv1.DaemonSet) error {
	st := ds.Status
	if ds.Generation > st.ObservedGeneration || st.DesiredNumberScheduled == 0 ||
		st.UpdatedNumberScheduled < st.DesiredNumberScheduled || st.NumberReady < st.DesiredNumberScheduled {
		return fmt.Errorf("daemonset %s/%s: %d of %d ready, %d updated", ds.Namespace, ds.Name,
			st.NumberReady, st.DesiredNumberScheduled, st.UpdatedNumberScheduled)
	}
	return nil
}

// writeHubbleCLICerts copies the hubble CLI's client certificate, which the
// operator issues, to where the lab's users find it (hubbleTLSDir: ca.crt,
// cli.crt, cli.key).
func writeHubbleCLICerts(ctx context.Context, cs kubernetes.Interface, p plan.Plan) error {
	s, err := cs.CoreV1().Secrets(ciliumNamespace).Get(ctx, hubbleCLISecret, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(hubbleTLSDir(p), 0o700); err != nil {
		return err
	}
	for key, file := range map[string]string{"ca.crt": pki.CACertFile, "tls.crt": "cli.crt", "tls.key": "cli.key"} {
		if len(s.Data[key]) == 0 {
			return fmt.Errorf("secret %s/%s has no %s yet", ciliumNamespace, hubbleCLISecret, key)
		}
		if err := os.WriteFile(hubbleTLS(p, file), s.Data[key], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// relayTarget is where hubble-relay serves, from a node: its Service's
// ClusterIP and port with cilium-go pods (the agents balance it), the
// first node's relay process otherwise. The one place that knows.
func relayTarget(ctx context.Context, cs kubernetes.Interface, p plan.Plan) (string, error) {
	if p.CiliumAs != plan.CiliumAsPods {
		return "localhost" + relayAddress, nil
	}
	svc, err := cs.CoreV1().Services(ciliumNamespace).Get(ctx, relayDeployment, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" {
		return "", fmt.Errorf("service %s/%s has no ClusterIP and port", ciliumNamespace, relayDeployment)
	}
	return fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port), nil
}

// writeRelayAddress records relayTarget in <state>/hubble-relay, for the
// tests and the demo.
func writeRelayAddress(ctx context.Context, cs kubernetes.Interface, p plan.Plan) error {
	addr, err := relayTarget(ctx, cs, p)
	if err != nil {
		return err
	}
	return os.WriteFile(RelayAddressFile(p.StateDir), []byte(addr+"\n"), 0o644)
}

// RelayAddressFile is where the lab writes hubble-relay's address, as seen
// from a node (host:port), once the lab is up.
func RelayAddressFile(stateDir string) string { return filepath.Join(stateDir, "hubble-relay") }
