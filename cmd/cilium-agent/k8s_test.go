package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/identity"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	k8sclient "github.com/cilium-go/cilium/pkg/k8s/client"
)

// The agent with Kubernetes (fake API servers in place of the real
// clients): a pod's endpoint gets the identity of its labels and a
// CiliumEndpoint, and both go with the endpoint.
func TestAgentWithKubernetes(t *testing.T) {
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "blue"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web",
			Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{NodeName: "a", ServiceAccountName: "default"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.2"}}}},
	)
	cilium := k8sclient.NewFake()
	dir := t.TempDir()
	dp := endpointtest.NewDatapath()
	c := startOnFakes(t, &k8sagent.Clients{Kube: kube, Cilium: cilium}, dp, dir, baseArgs(dir))
	ctx := context.Background()
	alloc, err := c.AllocateIP(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := c.PutEndpoint(ctx, models.EndpointRequest{ContainerID: "c1", PodName: "web", PodNamespace: "shop",
		IPv4: alloc.Address, MAC: "02:00:00:00:00:01", IfName: "eth0", HostIfName: "lxc1", HostIfindex: 5,
		NetNSPath: "/proc/1/ns/net"})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Identity < identity.MinClusterIdentity || dp.Endpoint(ep.ID).Identity != ep.Identity {
		t.Fatalf("endpoint identity %d, datapath %+v: want a cluster identity", ep.Identity, dp.Endpoint(ep.ID))
	}
	ids, err := cilium.CiliumV2().CiliumIdentities().List(ctx, metav1.ListOptions{})
	if err != nil || len(ids.Items) != 1 || ids.Items[0].SecurityLabels["k8s:io.cilium.k8s.namespace.labels.team"] != "blue" {
		t.Fatalf("CiliumIdentities %+v %v", ids, err)
	}

	ceps := cilium.CiliumV2().CiliumEndpoints("shop")
	testenv.Eventually(t, 30*time.Second, func() error {
		cep, err := ceps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cep.Status.Identity == nil || cep.Status.Identity.ID != int64(ep.Identity) {
			return fmt.Errorf("CiliumEndpoint identity %+v, want %d", cep.Status.Identity, ep.Identity)
		}
		if n := cep.Status.Networking; n.NodeIP != "192.168.0.2" || n.Addressing[0].IPV4 != alloc.Address {
			return fmt.Errorf("CiliumEndpoint networking %+v, want node IP 192.168.0.2 and address %s", n, alloc.Address)
		}
		return nil
	})

	// A relabelled pod moves to the identity of its new labels, in the
	// datapath and its CiliumEndpoint.
	pod, err := kube.CoreV1().Pods("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Labels = map[string]string{"app": "web", "tier": "front"}
	if _, err := kube.CoreV1().Pods("shop").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var relabelled models.Endpoint
	testenv.Eventually(t, 30*time.Second, func() error {
		relabelled, err = c.GetEndpoint(ctx, "c1")
		if err != nil {
			return err
		}
		if relabelled.Identity == ep.Identity {
			return fmt.Errorf("endpoint identity still %d after the relabel", ep.Identity)
		}
		if got := dp.Endpoint(ep.ID).Identity; got != relabelled.Identity {
			return fmt.Errorf("datapath identity %d, the relabelled endpoint's %d", got, relabelled.Identity)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		cep, err := ceps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cep.Status.Identity == nil || cep.Status.Identity.ID != int64(relabelled.Identity) {
			return fmt.Errorf("CiliumEndpoint identity %+v, want the new %d", cep.Status.Identity, relabelled.Identity)
		}
		return nil
	})

	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].Name != "a" || nodes[0].IPv4 != "192.168.0.2" || !nodes[0].Local {
		t.Fatalf("nodes %+v, %v: want the local node a at 192.168.0.2", nodes, err)
	}

	if err := c.DeleteEndpoint(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if _, err := ceps.Get(ctx, "web", metav1.GetOptions{}); err == nil {
			return errors.New("the CiliumEndpoint of a deleted endpoint is still there")
		}
		return nil
	})
}

func TestKubernetesFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "off by default: init identity", args: nil},
		{name: "on without node name", args: []string{"--enable-k8s"}, wantErr: "--k8s-node-name"},
		{name: "kubeconfig implies on", args: []string{"--kubeconfig=/nonexistent"}, wantErr: "--k8s-node-name"},
		{name: "kubeconfig missing", args: []string{"--kubeconfig=/nonexistent", "--k8s-node-name=a"}, wantErr: "/nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dp := endpointtest.NewDatapath()
			h, err := startAgent(t, dp, append(baseArgs(t.TempDir()), tt.args...)...)
			if err == nil {
				stop(t, h)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("start: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("start error %v, want one naming %s", err, tt.wantErr)
			}
		})
	}
}

// Without --ipam-pod-cidr the agent allocates from the pod CIDR that the
// operator wrote into this node's CiliumNode.
func TestAgentPodCIDRFromCiliumNode(t *testing.T) {
	cilium := k8sclient.NewFake()
	cn := &v2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	cn.Spec.IPAM.PodCIDRs = []string{"10.244.5.0/24"}
	if _, err := cilium.CiliumV2().CiliumNodes().Create(context.Background(), cn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var args []string
	for _, a := range baseArgs(dir) {
		if !strings.HasPrefix(a, "--ipam-pod-cidr=") {
			args = append(args, a)
		}
	}
	c := startOnFakes(t, &k8sagent.Clients{Kube: kubefake.NewClientset(), Cilium: cilium}, endpointtest.NewDatapath(), dir, args)
	alloc, err := c.AllocateIP(context.Background(), "c1")
	if err != nil || alloc.Address != "10.244.5.1" {
		t.Fatalf("allocated %+v, %v: want 10.244.5.1 from the CiliumNode's pod CIDR", alloc, err)
	}
}

// startOnFakes starts the agent of node a on clients (fakes in place of
// the API server) and the in-memory datapath dp, with args (baseArgs(dir)
// or a variant), and returns a client of its API.
func startOnFakes(t *testing.T, clients *k8sagent.Clients, dp *endpointtest.Datapath, dir string, args []string) *client.Client {
	t.Helper()
	withFakes := cell.Decorate(func(*k8sagent.Clients) *k8sagent.Clients { return clients }, ControlPlane)
	h, err := startHive(t, newHive(newLevel(), Infrastructure, withFakes, memDatapathCell(dp)), append(args, "--k8s-node-name=a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, h) })
	return client.New(filepath.Join(dir, "run", "cilium.sock"))
}
