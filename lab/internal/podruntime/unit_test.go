package podruntime

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/lab/internal/images"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

func TestContainerArgv(t *testing.T) {
	agn := images.Image{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}}
	shell := images.Image{Cmd: []string{"sh"}}
	env := []corev1.EnvVar{{Name: "PORT", Value: "8080"}}
	cases := []struct {
		name      string
		img       images.Image
		cmd, args []string
		want      []string
	}{
		{"image defaults", agn, nil, nil, []string{"/agnhost", "pause"}},
		{"args replace cmd", agn, nil, []string{"netexec", "--http-port=$(PORT)"}, []string{"/agnhost", "netexec", "--http-port=8080"}},
		{"command replaces entrypoint and cmd", agn, []string{"/bin/sh", "-c"}, nil, []string{"/bin/sh", "-c"}},
		{"command and args", agn, []string{"sh", "-c"}, []string{"echo $(PORT) $$(PORT) $(MISSING)"}, []string{"sh", "-c", "echo 8080 $(PORT) $(MISSING)"}},
		{"shell image", shell, nil, nil, []string{"sh"}},
		{"args with no entrypoint", shell, nil, []string{"true"}, []string{"true"}},
	}
	for _, tc := range cases {
		c := &corev1.Container{Command: tc.cmd, Args: tc.args}
		got, err := containerArgv(tc.img, c, env)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := containerArgv(images.Image{}, &corev1.Container{}, nil); err == nil {
		t.Error("empty image and container: want an error")
	}
}

func testPod(tweak func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "team", UID: "uid-1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{NodeName: "lab-node1", ServiceAccountName: "sa1",
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if tweak != nil {
		tweak(pod)
	}
	return pod
}

func TestContainerEnv(t *testing.T) {
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "team"}, Data: map[string]string{"MODE": "fast", "LEVEL": "3"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "team"}, Data: map[string][]byte{"TOKEN": []byte("s3cret")}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "team"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}}}},
	)
	pod := testPod(func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		c.EnvFrom = []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}, Prefix: "CFG_"},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr(true)}},
		}
		field := func(path string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
		}
		c.Env = []corev1.EnvVar{
			{Name: "POD_IP", ValueFrom: field("status.podIP")},
			{Name: "POD_IPS", ValueFrom: field("status.podIPs")},
			{Name: "HOST_IP", ValueFrom: field("status.hostIP")},
			{Name: "NAME", ValueFrom: field("metadata.name")},
			{Name: "NS", ValueFrom: field("metadata.namespace")},
			{Name: "APP", ValueFrom: field("metadata.labels['app']")},
			{Name: "NODE", ValueFrom: field("spec.nodeName")},
			{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
			{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPUS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "TOKEN"}}},
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "MODE"}}},
			{Name: "URL", Value: "http://$(NAME):$(DB_SERVICE_PORT)/$(CFG_LEVEL)"},
		}
	})
	facts := podFacts{Hostname: "web-1", NodeIP: netip.MustParseAddr("172.30.0.11"),
		PodIPs:  []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00::5")},
		NodeCPU: resource.MustParse("4"), NodeMemory: resource.MustParse("8Gi")}
	env, err := containerEnv(context.Background(), envSource{client: client}, pod, &pod.Spec.Containers[0], facts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range env {
		got[e.Name] = e.Value
	}
	want := map[string]string{
		"CFG_MODE": "fast", "CFG_LEVEL": "3",
		"POD_IP": "10.244.1.5", "POD_IPS": "10.244.1.5,fd00::5", "HOST_IP": "172.30.0.11",
		"NAME": "web-1", "NS": "team", "APP": "web", "NODE": "lab-node1", "SA": "sa1",
		"MEM_MI": "64", "CPUS": "4", "TOKEN": "s3cret", "MODE": "fast",
		"URL":                     "http://web-1:5432/3",
		"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
		"DB_SERVICE_HOST": "10.96.0.20", "HOSTNAME": "web-1", "PATH": defaultPath,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// A missing mandatory key is an error naming it.
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "NOPE"}}})
	if _, err := containerEnv(context.Background(), envSource{client: client}, pod, &pod.Spec.Containers[0], facts); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("missing key: err = %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestProjectionAndAtomicWrite(t *testing.T) {
	data := map[string][]byte{"a.conf": []byte("A"), "b.conf": []byte("B")}
	files, err := keyFiles("configmap", "cfg", data, nil, ptr(int32(0o600)), false)
	if err != nil || len(files) != 2 || files["a.conf"].Mode != 0o600 {
		t.Fatalf("all keys: %v %v", files, err)
	}
	files, err = keyFiles("configmap", "cfg", data, []corev1.KeyToPath{{Key: "b.conf", Path: "sub/b", Mode: ptr(int32(0o400))}}, nil, false)
	if err != nil || len(files) != 1 || string(files["sub/b"].Data) != "B" || files["sub/b"].Mode != 0o400 {
		t.Fatalf("items: %v %v", files, err)
	}
	if _, err := keyFiles("configmap", "cfg", data, []corev1.KeyToPath{{Key: "zz", Path: "zz"}}, nil, false); err == nil {
		t.Fatal("missing item key: want error")
	}

	pod := testPod(nil)
	dapi, err := downwardAPIFiles(pod, []corev1.DownwardAPIVolumeFile{
		{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "ns", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
	}, nil, podFacts{})
	if err != nil || string(dapi["labels"].Data) != `app="web"` || string(dapi["ns"].Data) != "team" {
		t.Fatalf("downward API: %v %v", dapi, err)
	}

	dir := t.TempDir()
	if err := writeAtomic(dir, files); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub/b")); err != nil || string(b) != "B" {
		t.Fatalf("read projected file: %q %v", b, err)
	}
	fi, _ := os.Stat(filepath.Join(dir, "sub/b"))
	if fi.Mode().Perm() != 0o400 {
		t.Errorf("mode %v, want 0400", fi.Mode().Perm())
	}
	if target, _ := os.Readlink(filepath.Join(dir, "sub")); target != "..data/sub" {
		t.Errorf("sub -> %q, want ..data/sub", target)
	}
	// A second payload replaces the first: stale entries and the old payload go away.
	if err := writeAtomic(dir, map[string]projectedFile{"new": {Data: []byte("N"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 3 || !slices.Contains(names, "new") || !slices.Contains(names, "..data") {
		t.Errorf("after update: %v", names)
	}
	if err := writeAtomic(dir, map[string]projectedFile{"../escape": {}}); err == nil {
		t.Error("path escaping the volume: want error")
	}
}

func TestProbeTracker(t *testing.T) {
	tr := newProbeTracker(&corev1.Probe{FailureThreshold: 2, SuccessThreshold: 2}, false)
	steps := []struct {
		ok, want, changed bool
	}{
		{true, false, false}, {true, true, true}, {false, true, false}, {true, true, false},
		{false, true, false}, {false, false, true}, {true, false, false}, {true, true, true},
	}
	for i, s := range steps {
		res, changed := tr.observe(s.ok)
		if res != s.want || changed != s.changed {
			t.Fatalf("step %d: observe(%v) = %v,%v; want %v,%v", i, s.ok, res, changed, s.want, s.changed)
		}
	}
	delay, period, timeout := probeTiming(&corev1.Probe{InitialDelaySeconds: 3})
	if delay != 3*time.Second || period != 10*time.Second || timeout != time.Second {
		t.Errorf("defaults: %v %v %v", delay, period, timeout)
	}
}

func TestBackoff(t *testing.T) {
	b := backoff{Initial: time.Second, Max: 5 * time.Second, Reset: time.Minute}
	var got []time.Duration
	for range 5 {
		got = append(got, b.delay(time.Second))
	}
	want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	if d := b.delay(2 * time.Minute); d != 0 {
		t.Errorf("after a long run: %v, want an immediate restart", d)
	}
	if d := b.delay(time.Second); d != time.Second {
		t.Errorf("after the reset: %v, want 1s", d)
	}
}

func TestEtcFiles(t *testing.T) {
	pod := testPod(func(p *corev1.Pod) {
		p.Spec.Hostname, p.Spec.Subdomain = "db-0", "db"
		p.Spec.HostAliases = []corev1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo", "bar"}}}
		p.Spec.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}}
	})
	hosts := string(hostsFile(pod, []netip.Addr{netip.MustParseAddr("10.0.0.7")}, "cluster.local", nil))
	for _, want := range []string{"127.0.0.1\tlocalhost", "10.0.0.7\tdb-0.db.team.svc.cluster.local\tdb-0", "1.2.3.4\tfoo\tbar"} {
		if !strings.Contains(hosts, want) {
			t.Errorf("hosts lacks %q:\n%s", want, hosts)
		}
	}
	resolv := string(resolvConf(pod, netip.MustParseAddr("10.96.0.10"), "cluster.local", nil))
	want := "search team.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:2\n"
	if resolv != want {
		t.Errorf("resolv.conf:\n%s\nwant:\n%s", resolv, want)
	}
	node := []byte("nameserver 192.0.2.53\nsearch corp\n")
	pod.Spec.HostNetwork, pod.Spec.DNSConfig = true, nil
	if got := string(resolvConf(pod, netip.MustParseAddr("10.96.0.10"), "cluster.local", node)); got != "search corp\nnameserver 192.0.2.53\n" {
		t.Errorf("host network ClusterFirst falls back to the node's: %q", got)
	}
	pod.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	if got := string(resolvConf(pod, netip.MustParseAddr("10.96.0.10"), "cluster.local", node)); !strings.Contains(got, "nameserver 10.96.0.10") {
		t.Errorf("ClusterFirstWithHostNet: %q", got)
	}
}

func TestVolumeMountsOrder(t *testing.T) {
	dir := t.TempDir()
	pod := testPod(func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "i", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data/sub/deep"}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "data", MountPath: "/data", ReadOnly: true},
			{Name: "cfg", MountPath: "/etc/app/x.conf", SubPath: "x.conf"},
		}
	})
	os.WriteFile(filepath.Join(dir, "x.conf"), []byte("x"), 0o644)
	vols := map[string]volumeSource{"data": {Path: "/node/data"}, "cfg": {Path: dir, ReadOnly: true}}
	got, err := volumeMounts(pod, vols)
	if err != nil {
		t.Fatal(err)
	}
	want := []mountSpec{
		{Source: "/node/data", Target: "/data", ReadOnly: true},
		{Source: "/node/data", Target: "/data/sub/deep"},
		{Source: filepath.Join(dir, "x.conf"), Target: "/etc/app/x.conf", ReadOnly: true, IsFile: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("mounts:\n%+v\nwant:\n%+v", got, want)
	}
}

type fakeFileInfo struct {
	fs.FileInfo
	mode fs.FileMode
}

func (f fakeFileInfo) Mode() fs.FileMode { return f.mode }
func (f fakeFileInfo) IsDir() bool       { return f.mode.IsDir() }

func TestPlanRoot(t *testing.T) {
	host := map[string]fs.FileMode{"/usr": fs.ModeDir, "/etc": fs.ModeDir, "/bin": fs.ModeSymlink, "/lib64": fs.ModeDir}
	lstat := func(p string) (os.FileInfo, error) {
		if m, ok := host[p]; ok {
			return fakeFileInfo{mode: m}, nil
		}
		return nil, os.ErrNotExist
	}
	readlink := func(string) (string, error) { return "usr/bin", nil }
	got := planRoot(lstat, readlink)
	want := []rootEntry{{Name: "usr", Overlay: true}, {Name: "etc", Overlay: true}, {Name: "bin", Link: "usr/bin"}, {Name: "lib64", Overlay: true}}
	if !slices.Equal(got, want) {
		t.Errorf("plan %+v, want %+v", got, want)
	}
}

func TestRenderLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	l, err := openLog(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"one", "two", "three"} {
		l.write([]string{"stdout", "stderr"}[i%2], []byte(s), false)
	}
	l.write("stdout", []byte("par"), true)
	l.write("stdout", []byte("tial"), false)
	l.Close()

	render := func(opts api.ContainerLogOpts) string {
		var b bytes.Buffer
		if err := renderLog(context.Background(), path, opts, closedChan, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := render(api.ContainerLogOpts{}); got != "one\ntwo\nthree\npartial\n" {
		t.Errorf("all: %q", got)
	}
	if got := render(api.ContainerLogOpts{Tail: 2}); got != "three\npartial\n" {
		t.Errorf("tail 2: %q", got)
	}
	if got := render(api.ContainerLogOpts{LimitBytes: 6}); got != "one\ntw" {
		t.Errorf("limit: %q", got)
	}
	ts := render(api.ContainerLogOpts{Timestamps: true, Tail: 1})
	if _, err := time.Parse(time.RFC3339Nano, strings.Fields(ts)[0]); err != nil || !strings.HasSuffix(ts, " partial\n") {
		t.Errorf("timestamps: %q", ts)
	}
	if got := render(api.ContainerLogOpts{SinceTime: time.Now().Add(time.Hour)}); got != "" {
		t.Errorf("since the future: %q", got)
	}

	// Follow returns what is appended until the writer is done.
	done := make(chan struct{})
	var out bytes.Buffer
	finished := make(chan error)
	go func() {
		finished <- renderLog(context.Background(), path, api.ContainerLogOpts{Follow: true, Tail: 1}, done, &out)
	}()
	l2, _ := openLog(path)
	l2.write("stdout", []byte("later"), false)
	l2.Close()
	close(done)
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	if out.String() != "partial\nlater\n" && out.String() != "later\n" {
		t.Errorf("follow: %q", out.String())
	}
}

func TestPhase(t *testing.T) {
	rt := &Runtime{cfg: Config{ClusterDomain: "cluster.local", Images: images.New(t.TempDir())}, notifier: newNotifier()}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	exited := func(code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
	}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	type ctr struct {
		state corev1.ContainerState
		final bool
		id    string
		ready bool
	}
	cases := []struct {
		name      string
		ctrs      []ctr
		want      corev1.PodPhase
		wantReady bool
	}{
		{"not started", []ctr{{state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}}, corev1.PodPending, false},
		{"running", []ctr{{state: running, id: "x", ready: true}}, corev1.PodRunning, true},
		{"one of two ready", []ctr{{state: running, id: "x", ready: true}, {state: running, id: "y"}}, corev1.PodRunning, false},
		{"crash looping", []ctr{{state: waiting, id: "x"}}, corev1.PodRunning, false},
		{"succeeded", []ctr{{state: exited(0), final: true, id: "x"}}, corev1.PodSucceeded, false},
		{"failed", []ctr{{state: exited(0), final: true, id: "x"}, {state: exited(2), final: true, id: "y"}}, corev1.PodFailed, false},
		{"exited, will restart", []ctr{{state: exited(1), id: "x"}}, corev1.PodRunning, false},
	}
	for _, tc := range cases {
		p := newPodState(rt, testPod(nil))
		p.pod.Spec.Containers = nil
		p.containers = nil
		for _, c := range tc.ctrs {
			p.containers = append(p.containers, &container{state: c.state, final: c.final, id: c.id, ready: c.ready, started: true})
		}
		p.initialized, p.creating = true, ""
		st := p.snapshot().Status
		ready := false
		for _, c := range st.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		if st.Phase != tc.want || ready != tc.wantReady {
			t.Errorf("%s: phase %s ready %v; want %s %v", tc.name, st.Phase, ready, tc.want, tc.wantReady)
		}
	}
}

func TestProbeAddr(t *testing.T) {
	rt := &Runtime{cfg: Config{ClusterDomain: "cluster.local", Images: images.New(t.TempDir())}, notifier: newNotifier()}
	p := newPodState(rt, testPod(nil))
	p.ips = []netip.Addr{netip.MustParseAddr("10.0.0.9")}
	c := &container{spec: corev1.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
	if got, err := p.probeAddr(c, "", intstr.FromString("http")); err != nil || got != "10.0.0.9:8080" {
		t.Errorf("named port: %q %v", got, err)
	}
	if got, err := p.probeAddr(c, "127.0.0.1", intstr.FromInt32(81)); err != nil || got != "127.0.0.1:81" {
		t.Errorf("host and number: %q %v", got, err)
	}
	if _, err := p.probeAddr(c, "", intstr.FromString("nope")); err == nil {
		t.Error("unknown port name: want error")
	}
}

func TestImageFilesOnTheHost(t *testing.T) {
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	cat := images.New(bin)
	cat.Register(images.Rule{Repositories: []string{"example.com/tool"}, Spec: images.Spec{
		Binaries: map[string]string{"tool": "/usr/bin/tool"},
		Extras:   map[string]string{"helper": "/usr/bin/helper"},
	}})
	rt := &Runtime{cfg: Config{Images: cat}}
	pod := testPod(nil)
	c := newContainer(rt, pod, &corev1.Container{Name: "a", Image: "example.com/tool:v1"}, false)
	if c.imageErr != nil || len(c.image.Files) != 1 || c.image.Files[0].Path != "/usr/bin/tool" {
		t.Errorf("optional file missing: %v %+v", c.imageErr, c.image.Files)
	}
	c = newContainer(rt, pod, &corev1.Container{Name: "b", Image: "registry.k8s.io/coredns/coredns:v1"}, false)
	if c.imageErr == nil || !strings.Contains(c.imageErr.Error(), "coredns") {
		t.Errorf("required file missing: %v", c.imageErr)
	}
	c = newContainer(rt, pod, &corev1.Container{Name: "c", Image: "quay.io/x/y:1"}, false)
	if c.imageErr == nil || !strings.Contains(c.imageErr.Error(), "quay.io/x/y:1") {
		t.Errorf("unknown image: %v", c.imageErr)
	}
}

func TestRunAsImageUser(t *testing.T) {
	image := ptr(int64(1234))
	for _, tc := range []struct {
		name     string
		pod, ctr *int64
		want     *int64
	}{
		{"image user", nil, nil, image},
		{"pod overrides", ptr(int64(1)), nil, ptr(int64(1))},
		{"container overrides", ptr(int64(1)), ptr(int64(2)), ptr(int64(2))},
	} {
		pod := testPod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: tc.pod}
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: tc.ctr}
		})
		uid, _ := runAs(pod, &pod.Spec.Containers[0], image, nil)
		if uid == nil || *uid != *tc.want {
			t.Errorf("%s: uid %v, want %d", tc.name, uid, *tc.want)
		}
	}
	if uid, _ := runAs(testPod(func(*corev1.Pod) {}), &corev1.Container{}, nil, nil); uid != nil {
		t.Errorf("no user anywhere: %d, want root (nil)", *uid)
	}
}

// An image's USER user:group: the group goes with the image's user, not with
// a user the pod chooses; runAsGroup wins.
func TestRunAsImageGroup(t *testing.T) {
	user, group := ptr(int64(65532)), ptr(int64(65533))
	for _, tc := range []struct {
		name             string
		podUser, ctrUser *int64
		podGroup         *int64
		wantUID, wantGID *int64
	}{
		{name: "image user and group", wantUID: user, wantGID: group},
		{name: "pod user, no group", podUser: ptr(int64(1)), wantUID: ptr(int64(1))},
		{name: "container user, no group", ctrUser: ptr(int64(2)), wantUID: ptr(int64(2))},
		{name: "runAsGroup", podGroup: ptr(int64(7)), wantUID: user, wantGID: ptr(int64(7))},
	} {
		pod := testPod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: tc.podUser, RunAsGroup: tc.podGroup}
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: tc.ctrUser}
		})
		uid, gid := runAs(pod, &pod.Spec.Containers[0], user, group)
		if fmt.Sprint(deref(uid)) != fmt.Sprint(deref(tc.wantUID)) || fmt.Sprint(deref(gid)) != fmt.Sprint(deref(tc.wantGID)) {
			t.Errorf("%s: %v:%v, want %v:%v", tc.name, deref(uid), deref(gid), deref(tc.wantUID), deref(tc.wantGID))
		}
	}
}

// mountPropagation is carried to the sandbox, and refused where it cannot
// work or may not be: Bidirectional only for privileged containers, and
// never for a file or a memory volume.
func TestVolumeMountsPropagation(t *testing.T) {
	bidi, h2c := corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer
	vols := map[string]volumeSource{"bpf": {Path: "/sys/fs/bpf"}, "netns": {Path: "/run/netns"},
		"mem": {Path: "/x", Tmpfs: true}, "file": {Path: "/f", IsFile: true}}
	mk := func(priv bool, mounts ...corev1.VolumeMount) *corev1.Pod {
		return testPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = mounts
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &priv}
		})
	}
	got, err := volumeMounts(mk(true, corev1.VolumeMount{Name: "bpf", MountPath: "/sys/fs/bpf", MountPropagation: &bidi},
		corev1.VolumeMount{Name: "netns", MountPath: "/var/run/netns", MountPropagation: &h2c}), vols)
	if err != nil {
		t.Fatal(err)
	}
	want := []mountSpec{{Source: "/sys/fs/bpf", Target: "/sys/fs/bpf", Propagation: "Bidirectional"},
		{Source: "/run/netns", Target: "/var/run/netns", Propagation: "HostToContainer"}}
	if !slices.Equal(got, want) {
		t.Errorf("mounts:\n%+v\nwant:\n%+v", got, want)
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{mk(false, corev1.VolumeMount{Name: "bpf", MountPath: "/b", MountPropagation: &bidi}), "needs a privileged container"},
		{mk(true, corev1.VolumeMount{Name: "mem", MountPath: "/m", MountPropagation: &h2c}), "only a directory of the node"},
		{mk(true, corev1.VolumeMount{Name: "file", MountPath: "/f", MountPropagation: &bidi}), "only a directory of the node"},
	} {
		if _, err := volumeMounts(tc.pod, vols); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}

func TestMountOf(t *testing.T) {
	mi := `22 1 0:21 / / rw shared:1 - ext4 /dev/sda rw
30 22 0:30 / /sys/fs/bpf rw,relatime shared:9 - bpf bpffs rw
31 22 0:31 / /run/netns rw master:4 - tmpfs tmpfs rw
32 22 0:32 / /run/net rw - tmpfs tmpfs rw
`
	entries := parseMountinfo(mi)
	for path, want := range map[string]string{"/sys/fs/bpf/tc": "/sys/fs/bpf", "/run/netns": "/run/netns",
		"/run/network": "/", "/run/net/x": "/run/net"} {
		if m, ok := mountOf(entries, path); !ok || m.Point != want {
			t.Errorf("mountOf(%s) = %+v, want %s", path, m, want)
		}
	}
}
