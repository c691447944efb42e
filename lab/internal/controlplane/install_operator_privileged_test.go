package controlplane

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/lab/internal/proc"
)

var (
	ciliumNodes      = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumnodes"}
	ciliumEndpoints  = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumendpoints"}
	ciliumIdentities = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumidentities"}
)

// checkOperatorAsServiceAccount runs the built cilium-operator with no
// more rights than its ServiceAccount (the admin kubeconfig impersonating
// it) and the settings the Deployment mounts from cilium-config, and
// watches it do each of its jobs: upgrade the CRDs, take the Lease, give
// Nodes CiliumNodes from the configured pool and remove those of deleted
// Nodes, mark an unused identity and delete the endpoint of a gone pod.
// Any "forbidden" in its log fails the test.
func checkOperatorAsServiceAccount(t *testing.T, ctx context.Context, cfg Config, ic *installClient, admin kubernetes.Interface, objs []*unstructured.Unstructured) {
	bin := filepath.Join(cfg.BinDir, "cilium-operator")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("cilium-operator not built (make build-cilium): %v", err)
	}
	dir := t.TempDir()
	kubeconfig := impersonatingKubeconfig(t, AdminKubeconfig(cfg), dir, "kube-system", "cilium-operator")
	configDir, settings := configDirOf(t, dir, objs, "Deployment", "cilium-operator")
	pool := netip.MustParsePrefix(settings["cluster-pool-ipv4-cidr"])
	mask, err := strconv.Atoi(settings["cluster-pool-ipv4-mask-size"])
	if err != nil {
		t.Fatal(err)
	}

	// What the operator finds: two Nodes, an identity no endpoint uses and
	// an endpoint whose pod does not exist.
	for _, n := range []string{"install-n1", "install-n2"} {
		node := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node"}}
		node.SetName(n)
		if err := ic.ApplyObject(ctx, node, false); err != nil {
			t.Fatal(err)
		}
	}
	id := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
		"security-labels": map[string]any{"k8s:app": "install-test"}}}
	id.SetName("54321")
	cep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint"}}
	cep.SetName("gone")
	cep.SetNamespace("default")
	for _, o := range []*unstructured.Unstructured{id, cep} {
		if err := ic.ApplyObject(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}

	const identity = "install-test-operator"
	logFile := filepath.Join(dir, "cilium-operator.log")
	start(t, proc.Spec{Name: "cilium-operator", Path: bin, Dir: dir, Namespaces: cfg.Namespaces, LogFile: logFile,
		Args: []string{"--kubeconfig=" + kubeconfig, "--config-dir=" + configDir, "--leader-election-identity=" + identity}})
	refuseForbidden(t, "cilium-operator", logFile)

	eventually(t, 60*time.Second, "Lease held by the operator", func() error {
		l, err := admin.CoordinationV1().Leases("kube-system").Get(ctx, "cilium-operator-resource-lock", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h == nil || *h != identity {
			return fmt.Errorf("holder %v", h)
		}
		return nil
	})
	for _, n := range []string{"install-n1", "install-n2"} {
		eventually(t, 60*time.Second, "pod CIDR of "+n, func() error {
			cn, err := ic.dyn.Resource(ciliumNodes).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cidrs, _, _ := unstructured.NestedStringSlice(cn.Object, "spec", "ipam", "podCIDRs")
			if len(cidrs) != 1 {
				return fmt.Errorf("podCIDRs %q", cidrs)
			}
			p, err := netip.ParsePrefix(cidrs[0])
			if err != nil || p.Bits() != mask || !pool.Overlaps(p) {
				return fmt.Errorf("pod CIDR %s outside %s or not /%d (%v)", cidrs[0], pool, mask, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
			}
			return nil
		})
	}
	eventually(t, 60*time.Second, "endpoint of a gone pod deleted", func() error {
		_, err := ic.dyn.Resource(ciliumEndpoints).Namespace("default").Get(ctx, "gone", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
	})
	eventually(t, 60*time.Second, "unused identity marked", func() error {
		got, err := ic.dyn.Resource(ciliumIdentities).Get(ctx, "54321", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := got.GetAnnotations()["cilium.io/unused-since"]; !ok {
			return errNotYet
		}
		return nil
	})
	if err := admin.CoreV1().Nodes().Delete(ctx, "install-n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "CiliumNode of a deleted Node removed", func() error {
		_, err := ic.dyn.Resource(ciliumNodes).Get(ctx, "install-n2", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
	})

}

// impersonatingKubeconfig writes a copy of the admin kubeconfig that acts
// as ServiceAccount ns/name: what the admin may do is no longer the point,
// the ServiceAccount's RBAC decides.
func impersonatingKubeconfig(t *testing.T, adminPath, dir, ns, name string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(adminPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = "system:serviceaccount:" + ns + ":" + name
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	out := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// configDirOf writes the files the pod of workload kind/name would find
// in its cilium-config volume and returns the directory and its settings.
func configDirOf(t *testing.T, dir string, objs []*unstructured.Unstructured, kind, name string) (string, map[string]string) {
	t.Helper()
	var data map[string]string
	var volumes []any
	for _, o := range objs {
		switch {
		case o.GetKind() == "ConfigMap" && o.GetName() == "cilium-config":
			data, _, _ = unstructured.NestedStringMap(o.Object, "data")
		case o.GetKind() == kind && o.GetName() == name:
			volumes, _, _ = unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		}
	}
	i := slices.IndexFunc(volumes, func(v any) bool {
		cm, _, _ := unstructured.NestedString(v.(map[string]any), "configMap", "name")
		return cm == "cilium-config"
	})
	if data == nil || i < 0 {
		t.Fatalf("no cilium-config ConfigMap or no volume of it in %s %s", kind, name)
	}
	items, _, _ := unstructured.NestedSlice(volumes[i].(map[string]any), "configMap", "items")
	configDir := filepath.Join(dir, "config-map")
	if err := os.Mkdir(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, it := range items {
		m := it.(map[string]any)
		key, path := m["key"].(string), m["path"].(string)
		settings[path] = data[key]
		if err := os.WriteFile(filepath.Join(configDir, path), []byte(data[key]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return configDir, settings
}

// refuseForbidden fails the test, when it ends, for every line of the
// component's log that says the API server refused it: a cleanup, so that
// the refusal is named even when a wait timed out.
func refuseForbidden(t *testing.T, name, logFile string) {
	t.Cleanup(func() {
		log, err := os.ReadFile(logFile)
		if err != nil {
			t.Error(err)
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("%s was refused: %s", name, line)
			}
		}
	})
}
