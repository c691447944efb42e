package controlplane

import (
	"context"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestBootstrapCreatesAndRepairs(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	for range 2 { // the second run must be a no-op that does not fail
		if err := Bootstrap(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	role, err := cs.RbacV1().ClusterRoles().Get(ctx, NodeResourcesRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) != 1 {
		t.Fatalf("rules %+v", role.Rules)
	}
	r := role.Rules[0]
	for _, res := range []string{"configmaps", "secrets", "services"} {
		if !slices.Contains(r.Resources, res) {
			t.Errorf("role misses %s", res)
		}
	}
	if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("verbs %v: nodes must only read", r.Verbs)
	}
	nodes, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, NodeResourcesRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nodes.Subjects[0].Kind != rbacv1.GroupKind || nodes.Subjects[0].Name != NodesGroup {
		t.Errorf("node binding subjects %+v", nodes.Subjects)
	}
	kubelet, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, KubeletAPIAdminBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kubelet.RoleRef.Name != "system:kubelet-api-admin" || kubelet.Subjects[0].Name != KubeletClientUser {
		t.Errorf("kubelet client binding %+v %+v", kubelet.RoleRef, kubelet.Subjects)
	}

	// Someone widened the role and re-pointed a binding: Bootstrap puts them back.
	role.Rules[0].Verbs = []string{"*"}
	if _, err := cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubelet.RoleRef.Name = "cluster-admin"
	if _, err := cs.RbacV1().ClusterRoleBindings().Update(ctx, kubelet, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Bootstrap(ctx, cs); err != nil {
		t.Fatal(err)
	}
	role, _ = cs.RbacV1().ClusterRoles().Get(ctx, NodeResourcesRole, metav1.GetOptions{})
	if !slices.Equal(role.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("role not repaired: %v", role.Rules[0].Verbs)
	}
	kubelet, _ = cs.RbacV1().ClusterRoleBindings().Get(ctx, KubeletAPIAdminBinding, metav1.GetOptions{})
	if kubelet.RoleRef.Name != "system:kubelet-api-admin" {
		t.Errorf("binding not repaired: %+v", kubelet.RoleRef)
	}
}
