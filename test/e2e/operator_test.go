package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/pkg/k8s/client"
)

// syncBuffer is an operator's log, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startOperator runs the operator binary as replica id against the lab.
func startOperator(t *testing.T, bin, kubeconfig, id string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--leader-election-identity="+id,
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=2s",
		"--leader-election-retry-period=500ms",
		"--cluster-pool-ipv4-cidr=10.200.0.0/16", "--cluster-pool-ipv4-mask-size=24",
		"--operator-api-serve-addr=") // two replicas on one host: no port for either
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("operator %s log:\n%s", id, log.String())
	})
	return cmd, log
}

// TestPrivilegedSmokeOperator runs the operator binary against a 1-node lab: it
// installs the CRDs and gives the node a pod CIDR from the pool; a second
// replica stands by and, when the first is killed without releasing its
// lease, takes over with the node's CIDR unchanged.
func TestPrivilegedSmokeOperator(t *testing.T) {
	lab := StartLab(t, "e2eop", "--nodes", "1", "--cni=bridge", "--kube-proxy=iptables")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go toolchain: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "cilium-operator")
	if out, err := exec.Command(gobin, "build", "-o", bin, "../../cmd/cilium-operator").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", lab.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	node := nodes.Items[0].Name

	a, _ := startOperator(t, bin, lab.Kubeconfig, "a")
	podCIDRs := func() error {
		cn, err := cs.CiliumV2().CiliumNodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := strings.Join(cn.Spec.IPAM.PodCIDRs, ","); got != "10.200.0.0/24" {
			return fmt.Errorf("CiliumNode %s has pod CIDRs %q", node, got)
		}
		return nil
	}
	lab.Eventually("node gets a pod CIDR", 30*time.Second, podCIDRs)
	lab.Eventually("Hubble's certificates issued", 30*time.Second, func() error {
		s, err := kube.CoreV1().Secrets("kube-system").Get(ctx, "hubble-server-certs", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.Data["ca.crt"])
		block, _ := pem.Decode(s.Data["tls.crt"])
		if block == nil {
			return fmt.Errorf("hubble-server-certs holds no certificate")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return err
		}
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: node + ".default.hubble-grpc.cilium.io",
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	})
	holder := func(want string) func() error {
		return func() error {
			l, err := kube.CoordinationV1().Leases("kube-system").Get(ctx, "cilium-operator-resource-lock", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != want {
				return fmt.Errorf("lease held by %v", l.Spec.HolderIdentity)
			}
			return nil
		}
	}
	lab.Eventually("a holds the lease", 10*time.Second, holder("a"))

	_, logB := startOperator(t, bin, lab.Kubeconfig, "b")
	lab.Eventually("b stands by", 10*time.Second, func() error {
		if !strings.Contains(logB.String(), "Standing by") {
			return fmt.Errorf("b has not seen a lead")
		}
		return holder("a")()
	})
	// SIGKILL: no release, so b must wait for the lease to lapse.
	if err := a.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	lab.Eventually("b takes over", 20*time.Second, holder("b"))
	lab.Eventually("b restores IPAM", 20*time.Second, func() error {
		if !strings.Contains(logB.String(), "Cluster-pool IPAM restored") {
			return fmt.Errorf("b has not restored IPAM yet")
		}
		return nil
	})
	if err := podCIDRs(); err != nil {
		t.Fatalf("after failover: %v", err)
	}
	if strings.Contains(logB.String(), "Updated CRD") {
		t.Error("b rewrote CRDs that a had installed unchanged")
	}
}
