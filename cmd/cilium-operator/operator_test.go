package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/leader"
	ciliumclient "github.com/cilium-go/cilium/pkg/k8s/client"
)

// fakeClients stands in for the API server: its CRDs are established as
// soon as they are written.
func fakeClients(objs ...runtime.Object) k8s.Clients {
	ext := apiextfake.NewClientset()
	establish := func(a k8stesting.Action) (bool, runtime.Object, error) {
		crd := a.(interface{ GetObject() runtime.Object }).GetObject().(*apiextensionsv1.CustomResourceDefinition)
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
		return false, nil, nil
	}
	ext.PrependReactor("create", "customresourcedefinitions", establish)
	ext.PrependReactor("update", "customresourcedefinitions", establish)
	return k8s.Clients{Kube: fake.NewClientset(objs...), Cilium: ciliumclient.NewFake(), APIExts: ext}
}

var fastElection = []string{"--leader-election-lease-duration=2s", "--leader-election-renew-deadline=1s",
	"--leader-election-retry-period=100ms"}

func startOperator(t *testing.T, c k8s.Clients, args ...string) (*hive.Hive, error) {
	t.Helper()
	h := hive.New(cell.Provide(func() k8s.Clients { return c }), leader.Cell, Controllers)
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	h.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Start(hivetest.Logger(t), ctx); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := h.Stop(hivetest.Logger(t), context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return h, nil
}

func TestOperatorInstallsCRDsAndAllocates(t *testing.T) {
	c := fakeClients(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}})
	_, err := startOperator(t, c, append(fastElection, "--cluster-pool-ipv4-cidr=10.20.0.0/16,10.30.0.0/16",
		"--cluster-pool-ipv4-mask-size=26")...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testenv.Eventually(t, 20*time.Second, func() error {
		cn, err := c.Cilium.CiliumV2().CiliumNodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("CiliumNode n1: %w", err)
		}
		if got := strings.Join(cn.Spec.IPAM.PodCIDRs, ","); got != "10.20.0.0/26" {
			return fmt.Errorf("CiliumNode n1 pod CIDRs %q, want 10.20.0.0/26", got)
		}
		return nil
	})
	crds, err := c.APIExts.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil || len(crds.Items) == 0 {
		t.Fatalf("CRDs: %v %v", crds, err)
	}
	lease, err := c.Kube.CoordinationV1().Leases("kube-system").Get(ctx, "cilium-operator-resource-lock", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("lease: %+v %v", lease, err)
	}
}

func TestBadFlagStopsStartupNamingIt(t *testing.T) {
	for _, tc := range []struct{ arg, flag string }{
		{"--cluster-pool-ipv4-cidr=10.0.0.0/33", "--cluster-pool-ipv4-cidr"},
		{"--cluster-pool-ipv4-mask-size=40", "--cluster-pool-ipv4-mask-size"},
		{"--identity-gc-interval=0s", "--identity-gc-interval"},
		{"--leader-election-renew-deadline=1m", "--leader-election-lease-duration"},
	} {
		_, err := startOperator(t, fakeClients(), append(fastElection, tc.arg)...)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: error %v, want it to name %s", tc.arg, err, tc.flag)
		}
	}
}

func TestCommandNeedsAnAPIServer(t *testing.T) {
	cmd := newCommand(Infrastructure, Controllers)
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--kubeconfig=/nonexistent/kubeconfig"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--kubeconfig /nonexistent/kubeconfig") {
		t.Fatalf("error %v, output %q", err, out.String())
	}
}
