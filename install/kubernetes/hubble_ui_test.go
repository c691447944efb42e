package kubernetes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/operator/hubblecerts"
	"github.com/cilium-go/cilium/pkg/paths"
)

// deploymentContainer is the container called name of the Deployment of the same
// name, with its pod's spec.
func deploymentContainer(t *testing.T, name string) (*corev1.PodSpec, *corev1.Container) {
	t.Helper()
	d := mustObject[*appsv1.Deployment](t, name)
	c, err := findContainer(&d.Spec.Template.Spec, name)
	if err != nil {
		t.Fatal(err)
	}
	return &d.Spec.Template.Spec, c
}

// secretFile is what c finds at the file its argument flag names, from
// the Secrets in kube.
func secretFile(t *testing.T, kube *fake.Clientset, spec *corev1.PodSpec, c *corev1.Container, flag string) []byte {
	t.Helper()
	file := argOf(c, flag)
	name, key, ok := strings.Cut(mountedFiles(spec, c)[file], "/")
	if !ok {
		t.Fatalf("%s %s %q: no file of a mounted Secret", c.Name, flag, file)
	}
	s, err := kube.CoreV1().Secrets("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Data[key]) == 0 {
		t.Fatalf("%s %s: Secret %s has no %s", c.Name, flag, name, key)
	}
	return s.Data[key]
}

// TestUIAndRelayTrustEachOther: with the certificates the operator
// issues, mounted where the manifests say and named by the flags, the
// relay's mutual TLS serves the UI, and the UI accepts the relay under
// the name it asks for; the UI dials the hubble-relay Service's port.
func TestUIAndRelayTrustEachOther(t *testing.T) {
	kube := fake.NewClientset()
	if err := hubblecerts.Reconcile(context.Background(), kube, hubblecerts.DefaultConfig, time.Now()); err != nil {
		t.Fatal(err)
	}
	rSpec, relay := deploymentContainer(t, "hubble-relay")
	uSpec, ui := deploymentContainer(t, "hubble-ui")
	pool := func(pem []byte) *x509.CertPool {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(pem) {
			t.Fatal("no certificate in a CA file")
		}
		return p
	}
	serverCert, err := tls.X509KeyPair(secretFile(t, kube, rSpec, relay, "--tls-relay-server-cert-file"),
		secretFile(t, kube, rSpec, relay, "--tls-relay-server-key-file"))
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.X509KeyPair(secretFile(t, kube, uSpec, ui, "--tls-relay-client-cert-file"),
		secretFile(t, kube, uSpec, ui, "--tls-relay-client-key-file"))
	if err != nil {
		t.Fatal(err)
	}
	if argOf(ui, "--tls-to-relay-enabled") != "true" {
		t.Errorf("--tls-to-relay-enabled %q: the relay serves only TLS", argOf(ui, "--tls-to-relay-enabled"))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		s := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS13,
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool(secretFile(t, kube, rSpec, relay, "--tls-relay-client-ca-files"))})
		err = s.Handshake()
		if err == nil {
			_, err = s.Write([]byte("ok"))
		}
		s.Close()
		served <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS13,
		RootCAs: pool(secretFile(t, kube, uSpec, ui, "--tls-relay-ca-cert-files")), ServerName: argOf(ui, "--tls-relay-server-name")})
	var got []byte
	if err == nil {
		got, err = io.ReadAll(c)
		c.Close()
	}
	if serr := <-served; serr != nil || err != nil || string(got) != "ok" {
		t.Errorf("the UI towards the relay: relay %v, UI %v", serr, err)
	}

	svc := mustObject[*corev1.Service](t, "hubble-relay")
	host, port, err := net.SplitHostPort(argOf(ui, "--relay-address"))
	if err != nil || !strings.HasPrefix(host, svc.Name+"."+svc.Namespace+".svc") || port != strconv.Itoa(int(svc.Spec.Ports[0].Port)) {
		t.Errorf("--relay-address %q, want the %s/%s Service's port %d", argOf(ui, "--relay-address"), svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
	}
}

// TestUIServiceAndProbes: the hubble-ui Service is Cilium's (port 80,
// named http, labels cilium-cli selects by) and reaches the port the UI
// listens on, where the probes ask /healthz.
func TestUIServiceAndProbes(t *testing.T) {
	d := mustObject[*appsv1.Deployment](t, "hubble-ui")
	spec, ui := deploymentContainer(t, "hubble-ui")
	svc := mustObject[*corev1.Service](t, "hubble-ui")
	for _, labels := range []map[string]string{svc.Labels, d.Labels, d.Spec.Template.Labels} {
		if labels["k8s-app"] != "hubble-ui" || labels["app.kubernetes.io/name"] != "hubble-ui" {
			t.Errorf("labels %v, want Cilium's k8s-app and app.kubernetes.io/name hubble-ui", labels)
		}
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods lack", k, v)
		}
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", d.Spec.Replicas)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].Name != "http" {
		t.Fatalf("hubble-ui Service ports %+v, want one, http on 80", svc.Spec.Ports)
	}
	target := svc.Spec.Ports[0].TargetPort
	i := slices.IndexFunc(ui.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == target.String() || int(p.ContainerPort) == target.IntValue()
	})
	if i < 0 {
		t.Fatalf("the Service targets %s, no port of the container", target.String())
	}
	port := ui.Ports[i]
	if _, p, _ := net.SplitHostPort(argOf(ui, "--listen-address")); p != strconv.Itoa(int(port.ContainerPort)) {
		t.Errorf("--listen-address %q, want the Service's target port %d", argOf(ui, "--listen-address"), port.ContainerPort)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": ui.ReadinessProbe, "liveness": ui.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" ||
			(p.HTTPGet.Port.String() != port.Name && p.HTTPGet.Port.IntValue() != int(port.ContainerPort)) {
			t.Errorf("%s probe %+v, want GET /healthz on port %d", name, p, port.ContainerPort)
		}
	}
	if spec.HostNetwork {
		t.Error("the UI runs in the host's network namespace")
	}
}

// hostPathOf says which host path, and which file below it, c sees at
// file: the hostPath volume mounted at the longest prefix of file.
func hostPathOf(spec *corev1.PodSpec, c *corev1.Container, file string) (host, rel string) {
	best := ""
	for _, m := range c.VolumeMounts {
		r, ok := strings.CutPrefix(file, m.MountPath+"/")
		if !ok || len(m.MountPath) <= len(best) {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				best, host, rel = m.MountPath, v.HostPath.Path, r
			}
		}
	}
	return host, rel
}

// TestUIReachesTheAgentSocket: --agent-socket is the file of the node
// where the agent listens (its default --socket-path), and the UI runs
// as the socket's owner, root: the socket is 0660.
func TestUIReachesTheAgentSocket(t *testing.T) {
	ds := mustObject[*appsv1.DaemonSet](t, "cilium")
	agent, err := findContainer(&ds.Spec.Template.Spec, "cilium-agent")
	if err != nil {
		t.Fatal(err)
	}
	socket := paths.DefaultConfig.SocketPath
	if v, ok := mustObject[*corev1.ConfigMap](t, ConfigMapName).Data["socket-path"]; ok {
		socket = v
	}
	wantHost, wantRel := hostPathOf(&ds.Spec.Template.Spec, agent, socket)
	if wantHost == "" {
		t.Fatalf("the agent's socket %s is on no hostPath volume", socket)
	}
	spec, ui := deploymentContainer(t, "hubble-ui")
	host, rel := hostPathOf(spec, ui, argOf(ui, "--agent-socket"))
	if host != wantHost || rel != wantRel {
		t.Errorf("--agent-socket %q is the node's %s, want %s", argOf(ui, "--agent-socket"), path.Join(host, rel), path.Join(wantHost, wantRel))
	}
	uid := spec.SecurityContext.RunAsUser
	if c := ui.SecurityContext; c != nil && c.RunAsUser != nil {
		uid = c.RunAsUser
	}
	if uid == nil || *uid != 0 {
		t.Errorf("the UI runs as user %v, not root, the agent socket's owner", uid)
	}
	if c := ui.SecurityContext; c == nil || c.Privileged != nil && *c.Privileged ||
		c.Capabilities == nil || !slices.Equal(c.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("security context %+v, want every capability dropped", ui.SecurityContext)
	}
}

// TestUIReadsOnly: the UI's ServiceAccount may only read namespaces and
// network policies.
func TestUIReadsOnly(t *testing.T) {
	role := mustObject[*rbacv1.ClusterRole](t, "hubble-ui")
	var got []string
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("rule %+v: verb %s", r, v)
			}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				got = append(got, strings.TrimSuffix(res+"."+g, "."))
			}
		}
	}
	slices.Sort(got)
	want := []string{"ciliumclusterwidenetworkpolicies.cilium.io", "ciliumnetworkpolicies.cilium.io", "namespaces",
		"networkpolicies.networking.k8s.io"}
	if !slices.Equal(got, want) {
		t.Errorf("the UI may read %q, want %q", got, want)
	}
	binding := mustObject[*rbacv1.ClusterRoleBinding](t, "hubble-ui")
	d := mustObject[*appsv1.Deployment](t, "hubble-ui")
	pod := d.Spec.Template.Spec
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != pod.ServiceAccountName ||
		binding.Subjects[0].Namespace != d.Namespace {
		t.Errorf("binding %+v does not give the role to the UI's ServiceAccount %s", binding, pod.ServiceAccountName)
	}
	if pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken {
		t.Error("the UI gets no token for the API server")
	}
}
