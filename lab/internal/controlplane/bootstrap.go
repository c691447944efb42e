package controlplane

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Names of the RBAC objects Bootstrap owns.
const (
	NodeResourcesRole       = "cilium-lab:node-resources"
	KubeletAPIAdminBinding  = "cilium-lab:apiserver-kubelet-client"
	managedByLabel          = "app.kubernetes.io/managed-by"
	managedByValue          = "cilium-lab"
	kubeletAPIAdminRoleName = "system:kubelet-api-admin" // from the default bootstrap policy
)

// Bootstrap applies the RBAC the lab needs on top of the API server's default
// bootstrap policy. It creates or updates, so it is safe to run on every `up`.
func Bootstrap(ctx context.Context, cs kubernetes.Interface) error {
	for _, role := range bootstrapClusterRoles() {
		if err := applyClusterRole(ctx, cs, role); err != nil {
			return err
		}
	}
	for _, b := range bootstrapClusterRoleBindings() {
		if err := applyClusterRoleBinding(ctx, cs, b); err != nil {
			return err
		}
	}
	return nil
}

func labMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{managedByLabel: managedByValue}}
}

// bootstrapClusterRoles: the node agent is built on virtual-kubelet, whose resource
// manager keeps cluster-wide informers on ConfigMaps, Secrets and Services (to fill
// volumes and service environment variables). A real kubelet gets single objects
// the Node authorizer allows for its own pods; a cluster-wide list/watch is never
// allowed by it, so without this role the node agent's informers never sync and no
// pod starts. This widens what a node identity can read to every Secret, which a
// lab on one machine can accept; the Node authorizer still limits every write.
func bootstrapClusterRoles() []*rbacv1.ClusterRole {
	return []*rbacv1.ClusterRole{{
		ObjectMeta: labMeta(NodeResourcesRole),
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""},
			Resources: []string{"configmaps", "secrets", "services"},
			Verbs:     []string{"get", "list", "watch"},
		}},
	}}
}

func bootstrapClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	return []*rbacv1.ClusterRoleBinding{
		{
			ObjectMeta: labMeta(NodeResourcesRole),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeResourcesRole},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: NodesGroup}},
		},
		// The API server's client certificate for node agents is an ordinary user, not
		// a master; node agents authorize its exec/logs/port-forward requests with a
		// SubjectAccessReview on the nodes/proxy subresources, which this grants.
		{
			ObjectMeta: labMeta(KubeletAPIAdminBinding),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kubeletAPIAdminRoleName},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KubeletClientUser}},
		},
	}
}

func applyClusterRole(ctx context.Context, cs kubernetes.Interface, want *rbacv1.ClusterRole) error {
	api := cs.RbacV1().ClusterRoles()
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create clusterrole %s: %w", want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get clusterrole %s: %w", want.Name, err)
	}
	got.Labels = mergeLabels(got.Labels, want.Labels)
	got.Rules = want.Rules
	if _, err := api.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update clusterrole %s: %w", want.Name, err)
	}
	return nil
}

func applyClusterRoleBinding(ctx context.Context, cs kubernetes.Interface, want *rbacv1.ClusterRoleBinding) error {
	api := cs.RbacV1().ClusterRoleBindings()
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create clusterrolebinding %s: %w", want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get clusterrolebinding %s: %w", want.Name, err)
	}
	// roleRef is immutable: a binding that points elsewhere must be replaced.
	if got.RoleRef != want.RoleRef {
		if err := api.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete clusterrolebinding %s: %w", want.Name, err)
		}
		if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create clusterrolebinding %s: %w", want.Name, err)
		}
		return nil
	}
	got.Labels = mergeLabels(got.Labels, want.Labels)
	got.Subjects = want.Subjects
	if _, err := api.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update clusterrolebinding %s: %w", want.Name, err)
	}
	return nil
}

func mergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	for k, v := range want {
		have[k] = v
	}
	return have
}
