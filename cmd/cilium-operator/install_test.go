package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	install "github.com/cilium-go/cilium/install/kubernetes"
)

// TestDeploymentFlags runs the operator container's arguments and the
// cilium-config keys it mounts through the operator's real command line.
func TestDeploymentFlags(t *testing.T) {
	dep, err := install.Object[*appsv1.Deployment]("cilium-operator")
	if err != nil {
		t.Fatal(err)
	}
	spec := &dep.Spec.Template.Spec
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "cilium-operator" })
	if i < 0 {
		t.Fatal("no cilium-operator container")
	}
	c := &spec.Containers[i]
	files, err := install.ConfigFiles(spec, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	args, err := install.Args(c, map[string]string{"metadata.name": "cilium-operator-abc12"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--"+install.ConfigDirFlag+"=") })
	fs := newCommand(Infrastructure, Controllers).Flags()
	if err := fs.Parse(args); err != nil {
		t.Fatalf("operator flags: %v", err)
	}
	if err := install.ApplyConfigDir(fs, dir); err != nil {
		t.Fatalf("cilium-config: %v", err)
	}
	want := map[string]string{"leader-election-identity": "cilium-operator-abc12"}
	for k, v := range files {
		want[k] = v
	}
	// Values compare as the flag prints them: 5m is 5m0s.
	norm := newCommand(Infrastructure, Controllers).Flags()
	for name, v := range want {
		if err := norm.Set(name, v); err != nil {
			t.Fatal(err)
		}
		if got, want := fs.Lookup(name).Value.String(), norm.Lookup(name).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
	// The leader election Role grants the Lease the operator uses.
	role, err := install.Object[*rbacv1.Role]("cilium-operator")
	if err != nil {
		t.Fatal(err)
	}
	ns, lease := fs.Lookup("leader-election-namespace").Value.String(), fs.Lookup("leader-election-lease-name").Value.String()
	granted := slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "leases") && slices.Contains(r.ResourceNames, lease) && slices.Contains(r.Verbs, "update")
	})
	if role.Namespace != ns || !granted {
		t.Errorf("Lease %s/%s is not granted by Role %s/%s", ns, lease, role.Namespace, role.Name)
	}
}
