package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/cilium-go/cilium/lab/internal/apply"
)

// installDir holds cilium-go's manifests, relative to this package.
const installDir = "../../../install/kubernetes"

const installFieldManager = "cilium-go-install-test"

// TestPrivilegedInstallManifests applies install/kubernetes to a real API
// server (etcd and kube-apiserver in a fresh network namespace): the CRDs
// for real, then every manifest with a server-side dry run and strict
// field validation, then `kubectl apply -k` and `-R -f` dry-run as a user
// would; then
// for real, to dry-run the pods the DaemonSet and Deployment would create
// and to ask the RBAC authorizer whether the agent's and the operator's
// ServiceAccounts may do what their code does, and no more; last the built
// operator and agent run as their ServiceAccounts and do their jobs.
func TestPrivilegedInstallManifests(t *testing.T) {
	cfg, _, _ := prepareTestControlPlane(t)
	ctx, admin, dial := startAPI(t, cfg)
	ic := newInstallClient(t, AdminKubeconfig(cfg), dial)

	var crds, rest []*unstructured.Unstructured
	for _, o := range readInstall(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	if len(crds) == 0 || len(rest) == 0 {
		t.Fatalf("%d CRDs, %d other objects in %s", len(crds), len(rest), installDir)
	}
	for _, o := range crds {
		if err := ic.ApplyObject(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range crds {
		eventually(t, 30*time.Second, "CRD "+o.GetName()+" established", func() error { return ic.established(ctx, o.GetName()) })
	}

	t.Run("dry run", func(t *testing.T) {
		for _, o := range rest {
			if err := ic.ApplyObject(ctx, o, true); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("kubectl apply", func(t *testing.T) { kubectlApplyK(t, cfg) })

	for _, o := range rest {
		if err := ic.ApplyObject(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}
	// Pod admission (ServiceAccount, PriorityClass, pod validation) happens
	// only when the controllers create pods, which need the objects above.
	t.Run("pods admitted", func(t *testing.T) {
		for _, o := range rest {
			if pod := podOf(t, o); pod != nil {
				if err := ic.ApplyObject(ctx, pod, true); err != nil {
					t.Error(err)
				}
			}
		}
	})
	t.Run("dry run rejects what is wrong", func(t *testing.T) { checkDryRunRejects(t, ctx, ic, rest) })
	t.Run("RBAC", func(t *testing.T) { checkInstallRBAC(t, ctx, admin) })
	t.Run("operator as its ServiceAccount", func(t *testing.T) { checkOperatorAsServiceAccount(t, ctx, cfg, ic, admin, rest) })
	t.Run("agent as its ServiceAccount", func(t *testing.T) { checkAgentAsServiceAccount(t, ctx, cfg, ic, rest) })
}

// readInstall reads every file the kustomization lists, as kubectl would
// apply them.
func readInstall(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(installDir, "Kustomization"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, res := range k.Resources {
		f, err := os.Open(filepath.Join(installDir, res))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			// Raw JSON, so that unstructured decodes numbers as int64.
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			if len(raw) == 0 || string(raw) == "null" {
				continue // only comments
			}
			o := &unstructured.Unstructured{}
			if err := o.UnmarshalJSON(raw); err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			out = append(out, o)
		}
		f.Close()
	}
	return out
}

// installClient applies objects strictly (as the lab applies its add-ons)
// and reads CRDs back.
type installClient struct {
	*apply.Applier
	dyn dynamic.Interface
}

func newInstallClient(t *testing.T, kubeconfig string, dial func(context.Context, string, string) (net.Conn, error)) *installClient {
	t.Helper()
	rc := restConfig(t, kubeconfig, dial, 20*time.Second)
	a, err := apply.New(rc, installFieldManager)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &installClient{Applier: a, dyn: dyn}
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (c *installClient) established(ctx context.Context, name string) error {
	crd, err := c.dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return nil
		}
	}
	return errNotYet
}

// checkDryRunRejects: the dry run is a real check, not a formality: it
// turns down a manifest with an unknown field or a wrong type, and its pod
// with a missing PriorityClass.
func checkDryRunRejects(t *testing.T, ctx context.Context, ic *installClient, objs []*unstructured.Unstructured) {
	var ds *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			ds = o
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet")
	}
	for _, tc := range []struct {
		name    string
		path    []string
		value   any
		wantErr string
	}{
		{"unknown field", []string{"spec", "template", "spec", "hostNetwrk"}, true, "hostNetwrk"},
		{"wrong type", []string{"spec", "template", "spec", "hostNetwork"}, "yes", "hostNetwork"},
		{"unknown priority class", []string{"spec", "template", "spec", "priorityClassName"}, "no-such-class", "no-such-class"},
	} {
		bad := ds.DeepCopy()
		if err := unstructured.SetNestedField(bad.Object, tc.value, tc.path...); err != nil {
			t.Fatal(err)
		}
		err := ic.ApplyObject(ctx, bad, true)
		if err == nil {
			err = ic.ApplyObject(ctx, podOf(t, bad), true)
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.wantErr)
		}
	}
}

// podOf is a pod as a workload's controller would create it from o's
// template; nil when o is no workload.
func podOf(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	if o.GetKind() != "DaemonSet" && o.GetKind() != "Deployment" {
		return nil
	}
	spec, ok, err := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if err != nil || !ok {
		t.Fatalf("%s %s: no pod template: %v", o.GetKind(), o.GetName(), err)
	}
	labels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": spec}}
	pod.SetName(o.GetName() + "-dry-run")
	pod.SetNamespace(o.GetNamespace())
	pod.SetLabels(labels)
	return pod
}

// kubectlApplyK runs what a user runs, in the control plane's network
// namespace, both ways: kustomize builds the manifests, or kubectl reads
// the directory tree; the API server checks them.
func kubectlApplyK(t *testing.T, cfg Config) {
	kubectl := filepath.Join(cfg.BinDir, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("kubectl not built (make build-k8s): %v", err)
	}
	dir, err := filepath.Abs(installDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range [][]string{{"-k", dir}, {"-R", "-f", dir}} {
		args := append([]string{"--net=" + cfg.Namespaces.Net, "--", kubectl, "--kubeconfig=" + AdminKubeconfig(cfg), "apply"}, how...)
		cmd := exec.Command("nsenter", append(args, "--server-side", "--dry-run=server", "--validate=strict",
			"--field-manager="+installFieldManager)...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + t.TempDir()}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", how[0], err, out.String())
		}
		for _, want := range []string{"customresourcedefinition.apiextensions.k8s.io/ciliumnodes.cilium.io serverside-applied (server dry run)",
			"daemonset.apps/cilium serverside-applied (server dry run)",
			"deployment.apps/cilium-operator serverside-applied (server dry run)"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("kubectl apply %s: output lacks %q:\n%s", how[0], want, out.String())
			}
		}
	}
}

type access struct {
	verb, group, resource, namespace, name string
	allowed                                bool
}

// checkInstallRBAC asks the authorizer about the ServiceAccounts of the
// manifests. The allowed rows are the calls in pkg/k8s/agent, pkg/identity
// and operator/; the refused rows are near misses that least privilege
// keeps out.
func checkInstallRBAC(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	const ns = "kube-system"
	table := map[string][]access{
		"cilium": {
			{"get", "", "pods", "default", "", true},
			{"list", "", "pods", "", "", true},
			{"watch", "", "pods", "", "", true},
			{"get", "", "namespaces", "", "default", true},
			{"watch", "", "namespaces", "", "", true},
			{"list", "", "nodes", "", "", true},
			{"watch", "", "nodes", "", "", true},
			{"watch", "cilium.io", "ciliumnodes", "", "", true},
			{"list", "cilium.io", "ciliumendpoints", "", "", true},
			{"create", "cilium.io", "ciliumendpoints", "default", "", true},
			{"update", "cilium.io", "ciliumendpoints", "default", "p", true},
			{"delete", "cilium.io", "ciliumendpoints", "default", "p", true},
			{"create", "cilium.io", "ciliumidentities", "", "", true},
			{"get", "cilium.io", "ciliumidentities", "", "1234", true},
			{"watch", "cilium.io", "ciliumidentities", "", "", true},

			{"delete", "cilium.io", "ciliumidentities", "", "1234", false},
			{"update", "cilium.io", "ciliumnodes", "", "n1", false},
			{"update", "", "nodes", "", "n1", false},
			{"create", "", "pods", "default", "", false},
			{"get", "", "secrets", ns, "x", false},
			{"list", "", "configmaps", ns, "", false},
		},
		"cilium-operator": {
			{"create", "apiextensions.k8s.io", "customresourcedefinitions", "", "", true},
			{"get", "apiextensions.k8s.io", "customresourcedefinitions", "", "ciliumnodes.cilium.io", true},
			{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", "ciliumendpointslices.cilium.io", true},
			{"create", "coordination.k8s.io", "leases", ns, "", true},
			{"get", "coordination.k8s.io", "leases", ns, "cilium-operator-resource-lock", true},
			{"update", "coordination.k8s.io", "leases", ns, "cilium-operator-resource-lock", true},
			{"watch", "", "nodes", "", "", true},
			{"list", "", "pods", "", "", true},
			{"watch", "cilium.io", "ciliumnodes", "", "", true},
			{"create", "cilium.io", "ciliumnodes", "", "", true},
			{"update", "cilium.io", "ciliumnodes", "", "n1", true},
			{"delete", "cilium.io", "ciliumnodes", "", "n1", true},
			{"list", "cilium.io", "ciliumidentities", "", "", true},
			{"update", "cilium.io", "ciliumidentities", "", "1234", true},
			{"delete", "cilium.io", "ciliumidentities", "", "1234", true},
			{"list", "cilium.io", "ciliumendpoints", "", "", true},
			{"delete", "cilium.io", "ciliumendpoints", "default", "p", true},

			{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", "widgets.example.com", false},
			{"delete", "apiextensions.k8s.io", "customresourcedefinitions", "", "ciliumnodes.cilium.io", false},
			{"update", "coordination.k8s.io", "leases", ns, "kube-controller-manager", false},
			{"get", "coordination.k8s.io", "leases", "default", "cilium-operator-resource-lock", false},
			{"delete", "", "pods", "default", "p", false},
			{"create", "cilium.io", "ciliumendpoints", "default", "", false},
			{"get", "", "secrets", ns, "x", false},
		},
	}
	for sa, rows := range table {
		user := "system:serviceaccount:" + ns + ":" + sa
		allowed := func(a access) (bool, error) {
			r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
				Spec: authzv1.SubjectAccessReviewSpec{
					User:   user,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &authzv1.ResourceAttributes{
						Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name},
				}}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			return r.Status.Allowed, nil
		}
		// The authorizer learns of new bindings through its informers.
		eventually(t, 30*time.Second, sa+" bindings seen by the authorizer", func() error {
			ok, err := allowed(rows[0])
			if err == nil && !ok {
				err = errNotYet
			}
			return err
		})
		for _, a := range rows {
			got, err := allowed(a)
			if err != nil {
				t.Fatal(err)
			}
			if got != a.allowed {
				t.Errorf("%s: %s %s/%s in %q name %q: allowed %v, want %v", sa, a.verb, a.group, a.resource, a.namespace, a.name, got, a.allowed)
			}
		}
	}
}
