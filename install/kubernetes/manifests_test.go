package kubernetes

import (
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cilium-go/cilium/install/kubernetes/crds"
	"github.com/cilium-go/cilium/operator/hubblecerts"
)

func mustObjects(t *testing.T) []runtime.Object {
	t.Helper()
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func mustObject[T runtime.Object](t *testing.T, name string) T {
	t.Helper()
	o, err := Object[T](name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestObjects: the manifests hold exactly these objects, every namespaced
// one in kube-system.
func TestObjects(t *testing.T) {
	var got []string
	for _, o := range mustObjects(t) {
		m, err := meta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o.GetObjectKind().GroupVersionKind().Kind+" "+m.GetNamespace()+"/"+m.GetName())
	}
	want := []string{
		"ServiceAccount kube-system/cilium", "ClusterRole /cilium", "ClusterRoleBinding /cilium",
		"ServiceAccount kube-system/cilium-operator", "ClusterRole /cilium-operator", "ClusterRoleBinding /cilium-operator",
		"Role kube-system/cilium-operator", "RoleBinding kube-system/cilium-operator",
		"ConfigMap kube-system/cilium-config",
		"DaemonSet kube-system/cilium", "Deployment kube-system/cilium-operator",
		"ServiceAccount kube-system/cilium-proxy", "DaemonSet kube-system/cilium-proxy",
		"ServiceAccount kube-system/hubble-relay", "Service kube-system/hubble-peer", "Service kube-system/hubble-relay",
		"Deployment kube-system/hubble-relay",
		"ServiceAccount kube-system/hubble-ui", "ClusterRole /hubble-ui", "ClusterRoleBinding /hubble-ui",
		"Service kube-system/hubble-ui", "Deployment kube-system/hubble-ui",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("objects\n got %q\nwant %q", got, want)
	}
}

func TestDecodeIsStrict(t *testing.T) {
	for _, tc := range []struct{ name, doc, wantErr string }{
		{"unknown field", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\nautomount: true\n", "unknown field"},
		{"duplicate field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {}\ndata: {}\n", "already set"},
		{"unknown kind", "apiVersion: v1\nkind: Nothing\nmetadata: {name: a}\n", "Nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode("x.yaml", []byte("# comment only\n---\n"+tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "x.yaml document 1") {
				t.Fatalf("error %v, want one naming x.yaml document 1 and %q", err, tc.wantErr)
			}
		})
	}
}

// TestKustomizationListsEveryManifest: `kubectl apply -k` applies every
// CRD and every manifest, each once.
func TestKustomizationListsEveryManifest(t *testing.T) {
	got, err := Resources()
	if err != nil {
		t.Fatal(err)
	}
	crdFiles, err := fs.Glob(crds.Files(), "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range crdFiles {
		want = append(want, "crds/"+f)
	}
	own, err := fs.Glob(Files(), "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, own...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("kustomization resources\n got %q\nwant %q", got, want)
	}
}

// TestOperatorUpdatesOnlyCiliumCRDs: the names the operator may read and
// update are exactly the CRDs it installs.
func TestOperatorUpdatesOnlyCiliumCRDs(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range all {
		want = append(want, c.Name)
	}
	slices.Sort(want)
	role := mustObject[*rbacv1.ClusterRole](t, "cilium-operator")
	var named int
	for _, r := range role.Rules {
		if !slices.Contains(r.Resources, "customresourcedefinitions") {
			continue
		}
		if slices.Contains(r.Verbs, "create") {
			continue // creates cannot be limited by name
		}
		named++
		got := slices.Sorted(slices.Values(r.ResourceNames))
		if !slices.Equal(got, want) {
			t.Errorf("CRD rule %v names\n %q\nwant %q", r.Verbs, got, want)
		}
	}
	if named == 0 {
		t.Error("no CRD rule limited by name")
	}
}

// TestRBAC: no wildcards; every binding names an existing role and
// ServiceAccount; every workload runs as an existing ServiceAccount.
func TestRBAC(t *testing.T) {
	objs := mustObjects(t)
	has := map[string]bool{}
	for _, o := range objs {
		m, _ := meta.Accessor(o)
		has[o.GetObjectKind().GroupVersionKind().Kind+" "+m.GetNamespace()+"/"+m.GetName()] = true
	}
	checkRules := func(name string, rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames) {
				if strings.Contains(s, "*") {
					t.Errorf("%s: wildcard in rule %+v", name, r)
				}
			}
			if len(r.Verbs) == 0 || len(r.Resources) == 0 {
				t.Errorf("%s: empty rule %+v", name, r)
			}
		}
	}
	checkBinding := func(name, ns string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
		refNS := ns
		if ref.Kind == "ClusterRole" {
			refNS = ""
		}
		if !has[ref.Kind+" "+refNS+"/"+ref.Name] {
			t.Errorf("%s: no %s %s", name, ref.Kind, ref.Name)
		}
		for _, s := range subjects {
			if s.Kind != "ServiceAccount" || !has["ServiceAccount "+s.Namespace+"/"+s.Name] {
				t.Errorf("%s: subject %+v is not one of ours", name, s)
			}
		}
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			checkRules(o.Name, o.Rules)
		case *rbacv1.Role:
			checkRules(o.Name, o.Rules)
		case *rbacv1.ClusterRoleBinding:
			checkBinding(o.Name, "", o.RoleRef, o.Subjects)
		case *rbacv1.RoleBinding:
			checkBinding(o.Name, o.Namespace, o.RoleRef, o.Subjects)
		case *appsv1.DaemonSet:
			if !has["ServiceAccount "+o.Namespace+"/"+o.Spec.Template.Spec.ServiceAccountName] {
				t.Errorf("DaemonSet %s: no ServiceAccount %q", o.Name, o.Spec.Template.Spec.ServiceAccountName)
			}
		case *appsv1.Deployment:
			if !has["ServiceAccount "+o.Namespace+"/"+o.Spec.Template.Spec.ServiceAccountName] {
				t.Errorf("Deployment %s: no ServiceAccount %q", o.Name, o.Spec.Template.Spec.ServiceAccountName)
			}
		}
	}
}

// TestEveryConfigKeyIsMountedOnce: each cilium-config key reaches exactly
// one command's --config-dir, since the other would reject it as no flag
// of its own, but for the keys both commands have as flags (shared).
// (cmd/cilium-agent and cmd/cilium-operator check the keys against their
// flags.)
func TestEveryConfigKeyIsMountedOnce(t *testing.T) {
	ds := mustObject[*appsv1.DaemonSet](t, "cilium")
	dep := mustObject[*appsv1.Deployment](t, "cilium-operator")
	agent, err := ConfigFiles(&ds.Spec.Template.Spec, "cilium-agent")
	if err != nil {
		t.Fatal(err)
	}
	operator, err := ConfigFiles(&dep.Spec.Template.Spec, "cilium-operator")
	if err != nil {
		t.Fatal(err)
	}
	cm := mustObject[*corev1.ConfigMap](t, ConfigMapName)
	shared := map[string]bool{"cluster-name": true, "enable-l2-announcements": true}
	for key, value := range cm.Data {
		a, inAgent := agent[key]
		o, inOperator := operator[key]
		switch {
		case shared[key] && !(inAgent && inOperator):
			t.Errorf("key %s: mounted by agent %v, operator %v; want both", key, inAgent, inOperator)
		case !shared[key] && inAgent == inOperator:
			t.Errorf("key %s: mounted by agent %v, operator %v; want exactly one", key, inAgent, inOperator)
		case inAgent && a != value, inOperator && o != value:
			t.Errorf("key %s is mounted under another key's name", key)
		}
	}
	if n := len(agent) + len(operator); n != len(cm.Data)+len(shared) {
		t.Errorf("%d files mounted from %d keys", n, len(cm.Data))
	}
}

// TestCNIPluginInstall: the init container copies the plugin from where
// the image has it into the node's CNI binary directory. (The agent writes
// the network configuration: cmd/cilium-agent checks where.)
func TestCNIPluginInstall(t *testing.T) {
	ds := mustObject[*appsv1.DaemonSet](t, "cilium")
	spec := ds.Spec.Template.Spec
	if len(spec.InitContainers) != 1 {
		t.Fatalf("init containers: %d", len(spec.InitContainers))
	}
	c := spec.InitContainers[0]
	var binDir string
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == "/opt/cni/bin" {
				binDir = m.MountPath
			}
		}
	}
	script := strings.Join(c.Args, " ")
	if binDir == "" || !strings.Contains(script, "cp /usr/bin/cilium-cni "+binDir+"/") ||
		!strings.Contains(script, " "+binDir+"/cilium-cni") {
		t.Errorf("install-cni does not put /usr/bin/cilium-cni into the node's /opt/cni/bin (mounted at %q):\n%s", binDir, script)
	}
}

// TestAgentPod: what the agent needs from its pod.
func TestAgentPod(t *testing.T) {
	ds := mustObject[*appsv1.DaemonSet](t, "cilium")
	spec := ds.Spec.Template.Spec
	c, err := findContainer(&spec, "cilium-agent")
	if err != nil {
		t.Fatal(err)
	}
	if !spec.HostNetwork || spec.PriorityClassName != "system-node-critical" {
		t.Errorf("hostNetwork %v, priorityClassName %q", spec.HostNetwork, spec.PriorityClassName)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" {
		t.Errorf("tolerations %+v: want one tolerating every taint", spec.Tolerations)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("agent not privileged")
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/sys/fs/bpf" && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional) {
			t.Error("bpffs not mounted bidirectionally")
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for arg, field := range map[string]string{"--k8s-node-name": "spec.nodeName", "--node-ipv4": "status.hostIP"} {
		var v string
		for _, a := range c.Args {
			if rest, ok := strings.CutPrefix(a, arg+"=$("); ok {
				v = strings.TrimSuffix(rest, ")")
			}
		}
		if env[v] != field {
			t.Errorf("%s: from $(%s), which is %q, want %s", arg, v, env[v], field)
		}
	}
}

// mountedFiles are the files a container sees from projected Secrets:
// path in the container to Secret/key.
func mountedFiles(spec *corev1.PodSpec, c *corev1.Container) map[string]string {
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					continue
				}
				for _, it := range src.Secret.Items {
					out[m.MountPath+"/"+it.Path] = src.Secret.Name + "/" + it.Key
				}
			}
		}
	}
	return out
}

// The agent sees the pods' network namespaces as they come, where the
// runtime makes them: Hubble names a socket trace's pod by its namespace.
func TestAgentSeesPodNamespaces(t *testing.T) {
	ds := mustObject[*appsv1.DaemonSet](t, "cilium")
	agent, err := findContainer(&ds.Spec.Template.Spec, "cilium-agent")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range agent.VolumeMounts {
		if m.MountPath != "/var/run/netns" {
			continue
		}
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == "/var/run/netns" &&
				m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationHostToContainer {
				return
			}
		}
	}
	t.Error("the agent mounts no /var/run/netns of the host that shows namespaces made after it started")
}

// TestHubbleTLSFilesAreMounted: the agent's and the relay's certificate
// flags name files their pods mount from the Secrets the operator
// issues, and the hubble-peer Service reaches the agents' Hubble port.
func TestHubbleTLSFilesAreMounted(t *testing.T) {
	ds := mustObject[*appsv1.DaemonSet](t, "cilium")
	agent, err := findContainer(&ds.Spec.Template.Spec, "cilium-agent")
	if err != nil {
		t.Fatal(err)
	}
	cm := mustObject[*corev1.ConfigMap](t, ConfigMapName)
	files := mountedFiles(&ds.Spec.Template.Spec, agent)
	for key, want := range map[string]string{"hubble-tls-cert-file": "hubble-server-certs/tls.crt",
		"hubble-tls-key-file": "hubble-server-certs/tls.key", "hubble-tls-client-ca-files": "hubble-server-certs/ca.crt"} {
		if got := files[cm.Data[key]]; got != want {
			t.Errorf("agent %s %q holds %q, want %s", key, cm.Data[key], got, want)
		}
	}
	relay := mustObject[*appsv1.Deployment](t, "hubble-relay")
	c, err := findContainer(&relay.Spec.Template.Spec, "hubble-relay")
	if err != nil {
		t.Fatal(err)
	}
	files = mountedFiles(&relay.Spec.Template.Spec, c)
	for flag, want := range map[string]string{
		// Towards the nodes.
		"--tls-hubble-client-cert-file": "hubble-relay-client-certs/tls.crt",
		"--tls-hubble-client-key-file":  "hubble-relay-client-certs/tls.key", "--tls-hubble-server-ca-files": "hubble-relay-client-certs/ca.crt",
		// Towards its clients, with mutual TLS: the Hubble CA signs the
		// CLI's certificate (hubble-cli-client-certs) too.
		"--tls-relay-server-cert-file": "hubble-relay-server-certs/tls.crt",
		"--tls-relay-server-key-file":  "hubble-relay-server-certs/tls.key", "--tls-relay-client-ca-files": "hubble-relay-client-certs/ca.crt",
	} {
		if path := argOf(c, flag); files[path] != want {
			t.Errorf("relay %s %q holds %q, want %s", flag, path, files[path], want)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--disable-server-tls") }) {
		t.Error("the relay serves in plaintext")
	}
	peer := mustObject[*corev1.Service](t, "hubble-peer")
	port := peer.Spec.Ports[0].TargetPort.IntValue()
	if !slices.ContainsFunc(agent.Ports, func(p corev1.ContainerPort) bool { return int(p.ContainerPort) == port }) ||
		cm.Data["hubble-listen-address"] != ":"+strconv.Itoa(port) {
		t.Errorf("hubble-peer targets %d; the agent listens on %q", port, cm.Data["hubble-listen-address"])
	}
}

// argOf is the value of c's argument --flag=value; empty without.
func argOf(c *corev1.Container, flag string) string {
	var v string
	for _, a := range c.Args {
		if after, ok := strings.CutPrefix(a, flag+"="); ok {
			v = after
		}
	}
	return v
}

// TestRelayPorts: the hubble-relay Service is on Cilium's port for TLS,
// 443, to the port the relay serves on with TLS, on the pod's IP (from the
// downward API); the same port on the pod's loopback serves port-forwards
// in plaintext; the kubelet's gRPC probes, which speak no TLS, go to its
// plaintext health port.
func TestRelayPorts(t *testing.T) {
	relay := mustObject[*appsv1.Deployment](t, "hubble-relay")
	c, err := findContainer(&relay.Spec.Template.Spec, "hubble-relay")
	if err != nil {
		t.Fatal(err)
	}
	svc := mustObject[*corev1.Service](t, "hubble-relay")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 {
		t.Fatalf("hubble-relay Service ports %+v, want 443", svc.Spec.Ports)
	}
	target := svc.Spec.Ports[0].TargetPort
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == target.String() || int(p.ContainerPort) == target.IntValue()
	})
	port := ""
	if i >= 0 {
		port = strconv.Itoa(int(c.Ports[i].ContainerPort))
	}
	if i < 0 || argOf(c, "--listen-address") != "$(POD_IP):"+port {
		t.Errorf("the Service targets %s; the relay listens on %q, want the pod's IP", target.String(), argOf(c, "--listen-address"))
	}
	if got := argOf(c, "--local-listen-address"); got != "127.0.0.1:"+port {
		t.Errorf("--local-listen-address %q, want the Service's target port on loopback, 127.0.0.1:%s", got, port)
	}
	if i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_IP" }); i < 0 ||
		c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env %+v has no POD_IP from status.podIP", c.Env)
	}
	health := argOf(c, "--health-listen-address")
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.GRPC == nil || ":"+strconv.Itoa(int(p.GRPC.Port)) != health {
			t.Errorf("%s probe %+v, want gRPC to --health-listen-address %q", name, p, health)
		}
	}
}

// TestOperatorMayWriteHubbleSecrets: the operator's Role names every
// Secret it issues Hubble's certificates into.
func TestOperatorMayWriteHubbleSecrets(t *testing.T) {
	role := mustObject[*rbacv1.Role](t, "cilium-operator")
	var names []string
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "secrets") && slices.Contains(r.Verbs, "update") {
			names = append(names, r.ResourceNames...)
		}
	}
	for _, want := range hubblecerts.Secrets() {
		if !slices.Contains(names, want) {
			t.Errorf("the operator may not update Secret %s; it may %q", want, names)
		}
	}
}
