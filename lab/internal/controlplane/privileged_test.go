package controlplane

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/lab/internal/pki"
)

// TestPrivilegedControlPlane runs the real control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) from Processes in a fresh network
// namespace and checks what makes it a real cluster: TLS and client certificates,
// Node and RBAC authorization with NodeRestriction, working controllers and
// scheduler, and the lab's Bootstrap RBAC.
func TestPrivilegedControlPlane(t *testing.T) {
	cfg, ca, nodeFiles := prepareTestControlPlane(t)

	// etcd and the API server first; the controller manager exits when the API
	// server is unreachable at start (the supervisor restarts it), so the test
	// starts it and the scheduler once the API is ready, as a restart would.
	specs := Processes(cfg)
	begin := time.Now()
	ctx, admin, dial := startAPI(t, cfg)
	apiReady := time.Since(begin)
	for _, spec := range specs[2:] {
		start(t, spec)
	}

	// Controllers: a new namespace gets its default ServiceAccount (serviceaccount
	// controller) and the kube-root-ca.crt ConfigMap (root CA publisher).
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cltest"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "default ServiceAccount and kube-root-ca.crt", func() error {
		if _, err := admin.CoreV1().ServiceAccounts("cltest").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		cm, err := admin.CoreV1().ConfigMaps("cltest").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["ca.crt"] != string(ca.CertPEM()) {
			return fmt.Errorf("kube-root-ca.crt does not hold the lab CA")
		}
		return nil
	})
	controllersReady := time.Since(begin)

	t.Run("health endpoints", func(t *testing.T) { checkHealth(t, ctx, cfg, ca, dial) })
	t.Run("anonymous is refused", func(t *testing.T) { checkAnonymous(t, ctx, cfg, ca, dial) })
	t.Run("identities", func(t *testing.T) { checkIdentities(t, ctx, cfg, nodeFiles, dial) })

	node := clientset(t, nodeFiles.Kubeconfig, dial)
	proxy := clientset(t, nodeFiles.KubeProxyKubeconfig, dial)
	t.Run("node identity", func(t *testing.T) { checkNodeIdentity(t, ctx, node, proxy) })

	t.Run("scheduling and the node graph", func(t *testing.T) { checkScheduling(t, ctx, admin, node) })

	t.Run("bootstrap RBAC", func(t *testing.T) { checkBootstrap(t, ctx, admin, node, proxy) })

	t.Logf("control plane timing from process start: API ready %v, controllers ready %v",
		apiReady.Round(10*time.Millisecond), controllersReady.Round(10*time.Millisecond))
}

// prepareTestControlPlane skips unless root with the Kubernetes binaries built,
// then creates the control-plane namespace (172.30.0.2) and runs Prepare and
// NodeCredentials for lab-node1. etcd is the test binary itself (see TestMain).
// startAPI starts etcd and the API server of cfg (the first two of
// Processes) and waits for /readyz; it returns the test's context, the
// admin clientset and the dialer into the control plane's namespace.
func startAPI(t *testing.T, cfg Config) (context.Context, *kubernetes.Clientset, func(context.Context, string, string) (net.Conn, error)) {
	t.Helper()
	specs := Processes(cfg)
	start(t, specs[0], etcdChildEnv+"=1")
	start(t, specs[1])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	dial := dialerIn(cfg.Namespaces.Net)
	admin := clientset(t, AdminKubeconfig(cfg), dial)
	eventually(t, 90*time.Second, "API server /readyz", func() error {
		body, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("readyz: %s", body)
		}
		return err
	})
	return ctx, admin, dial
}

func prepareTestControlPlane(t *testing.T) (Config, *pki.CA, NodeFiles) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and runs the control plane in it")
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	binDir, err := filepath.Abs("../../../bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			t.Skipf("%s not built (make build-k8s): %v", b, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(filepath.Join(t.TempDir(), "control-plane"))
	cfg.BinDir, cfg.LabBinary = binDir, self
	cfg.Namespaces.Net = newNetns(t, "172.30.0.2/24")
	ca, err := pki.NewCA("cilium-lab test CA")
	if err != nil {
		t.Fatal(err)
	}
	if err := Prepare(cfg, ca); err != nil {
		t.Fatal(err)
	}
	nodeFiles, err := NodeCredentials(cfg, ca, "lab-node1", netip.MustParseAddr("172.30.0.11"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, ca, nodeFiles
}

// checkBootstrap: after Bootstrap (run twice: it is idempotent) nodes read
// Secrets, ConfigMaps and Services cluster-wide; kube-proxy still reads no Secrets.
func checkBootstrap(t *testing.T, ctx context.Context, admin, node, proxy kubernetes.Interface) {
	for range 2 {
		if err := Bootstrap(ctx, admin); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "node lists secrets after Bootstrap", func() error {
		_, err := node.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		return err
	})
	for _, res := range []string{"configmaps", "services"} {
		if err := node.CoreV1().RESTClient().Get().Resource(res).Do(ctx).Error(); err != nil {
			t.Errorf("node lists %s cluster-wide: %v", res, err)
		}
	}
	if _, err := proxy.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("kube-proxy lists secrets after Bootstrap: err=%v, want Forbidden", err)
	}
}

func clientset(t *testing.T, kubeconfigPath string, dial func(context.Context, string, string) (net.Conn, error)) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig(t, kubeconfigPath, dial, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkHealth reads every component's health URL verifying its serving certificate
// with the lab CA.
func checkHealth(t *testing.T, ctx context.Context, cfg Config, ca *pki.CA, dial func(context.Context, string, string) (net.Conn, error)) {
	hc := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext:     dial,
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool()},
		},
	}
	for name, url := range HealthURLs(cfg) {
		eventually(t, 60*time.Second, name+" health", func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(body) != "ok" {
				return fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
			}
			return nil
		})
	}
}

// checkAnonymous: a client with no certificate reaches the API over TLS but may not
// read anything; with AlwaysAllow it could.
func checkAnonymous(t *testing.T, ctx context.Context, cfg Config, ca *pki.CA, dial func(context.Context, string, string) (net.Conn, error)) {
	anon, err := kubernetes.NewForConfig(&rest.Config{
		Host:            cfg.ServerURL(),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM()},
		Dial:            dial,
		Timeout:         10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = anon.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Errorf("anonymous list namespaces: err=%v, want Forbidden or Unauthorized", err)
	}
}

// checkIdentities asks the API server who each credential is (SelfSubjectReview),
// including a user asserted in headers by the front proxy's client certificate.
func checkIdentities(t *testing.T, ctx context.Context, cfg Config, nf NodeFiles, dial func(context.Context, string, string) (net.Conn, error)) {
	l := paths(cfg)
	proxyCfg := &rest.Config{
		Host: cfg.ServerURL(),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile: l.caCert, CertFile: l.frontProxyClient + ".crt", KeyFile: l.frontProxyClient + ".key",
		},
		Dial:    dial,
		Timeout: 10 * time.Second,
	}
	proxyCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Remote-User", "alice")
			r.Header.Set("X-Remote-Group", "lab-devs")
			return rt.RoundTrip(r)
		})
	})
	frontProxy, err := kubernetes.NewForConfig(proxyCfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		cs    kubernetes.Interface
		user  string
		group string
	}{
		{"admin", clientset(t, AdminKubeconfig(cfg), dial), AdminUser, "system:masters"},
		{"node", clientset(t, nf.Kubeconfig, dial), "system:node:lab-node1", NodesGroup},
		{"kube-proxy", clientset(t, nf.KubeProxyKubeconfig, dial), KubeProxyUser, "system:authenticated"},
		{"front proxy", frontProxy, "alice", "lab-devs"},
	}
	for _, tc := range tests {
		review, err := tc.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		u := review.Status.UserInfo
		if u.Username != tc.user || !slices.Contains(u.Groups, tc.group) {
			t.Errorf("%s authenticated as %q %v, want %q in %q", tc.name, u.Username, u.Groups, tc.user, tc.group)
		}
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// checkNodeIdentity: the Node authorizer and NodeRestriction let a node register
// itself and nothing else, and do not let it list secrets.
func checkNodeIdentity(t *testing.T, ctx context.Context, node, proxy kubernetes.Interface) {
	if _, err := node.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node lists secrets before Bootstrap: err=%v, want Forbidden", err)
	}
	if _, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lab-node2"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("lab-node1 creates Node lab-node2: err=%v, want Forbidden", err)
	}
	self := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lab-node1"}}
	if _, err := node.CoreV1().Nodes().Create(ctx, self, metav1.CreateOptions{}); err != nil {
		t.Fatalf("lab-node1 registers itself: %v", err)
	}
	// The node IPAM controller gives the node a pod CIDR from the cluster CIDR.
	var got *corev1.Node
	eventually(t, 30*time.Second, "pod CIDR allocation", func() error {
		var err error
		got, err = node.CoreV1().Nodes().Get(ctx, "lab-node1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Spec.PodCIDR == "" {
			return errNotYet
		}
		return nil
	})
	cidr, err := netip.ParsePrefix(got.Spec.PodCIDR)
	if err != nil || cidr.Bits() != 24 || !netip.MustParsePrefix("10.244.0.0/16").Contains(cidr.Addr()) {
		t.Errorf("pod CIDR %q, want a /24 of 10.244.0.0/16", got.Spec.PodCIDR)
	}
	// A patch, not an update: the node lifecycle controller taints the node
	// meanwhile, and NodeRestriction refuses a node that rewrites its taints.
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	status := map[string]any{"status": corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Test",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.0.11"}},
		Capacity:  capacity, Allocatable: capacity,
	}}
	patch, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.CoreV1().Nodes().PatchStatus(ctx, "lab-node1", patch); err != nil {
		t.Fatalf("node patches its status: %v", err)
	}
	if _, err := proxy.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("kube-proxy lists EndpointSlices: %v", err)
	}
	if _, err := proxy.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("kube-proxy lists secrets: err=%v, want Forbidden", err)
	}
}

// checkScheduling: the scheduler binds a pod to the node, after which the Node
// authorizer lets that node read the Secret the pod mounts, and only that one.
func checkScheduling(t *testing.T, ctx context.Context, admin, node kubernetes.Interface) {
	for _, name := range []string{"mounted", "unrelated"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"k": "v"}}
		if _, err := admin.CoreV1().Secrets("cltest").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "cltest"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53"}},
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "mounted"},
			}}},
			// The node lifecycle controller may taint the fake node; the test is
			// about binding, not readiness.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
	if _, err := admin.CoreV1().Pods("cltest").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 60*time.Second, "pod bound to lab-node1", func() error {
		p, err := admin.CoreV1().Pods("cltest").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "lab-node1" {
			return fmt.Errorf("pod on %q", p.Spec.NodeName)
		}
		return nil
	})
	t.Logf("pod scheduled %v after creation", took.Round(10*time.Millisecond))
	eventually(t, 30*time.Second, "node reads its pod's secret", func() error {
		_, err := node.CoreV1().Secrets("cltest").Get(ctx, "mounted", metav1.GetOptions{})
		return err
	})
	if _, err := node.CoreV1().Secrets("cltest").Get(ctx, "unrelated", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node reads a secret no pod of it uses: err=%v, want Forbidden", err)
	}
}

// restConfig reads a kubeconfig whose server is dialled through dial.
func restConfig(t *testing.T, kubeconfigPath string, dial func(context.Context, string, string) (net.Conn, error), timeout time.Duration) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	rc.Dial = dial
	rc.Timeout = timeout
	return rc
}
