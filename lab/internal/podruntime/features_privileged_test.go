package podruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sharedTmpfs mounts a tmpfs on a fresh directory of the test's node and
// makes it a shared mount, as a node's bpffs or /run/netns is.
func sharedTmpfs(t *testing.T, shared bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	prop := uintptr(unix.MS_PRIVATE)
	if shared {
		prop = unix.MS_SHARED
	}
	if err := unix.Mount("", dir, "", prop, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

func hostPathVolume(name, path string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
}

func propagation(m corev1.MountPropagationMode) *corev1.MountPropagationMode { return &m }

// TestPrivilegedMountPropagation: Bidirectional hands the pod's mounts to the
// node (an agent's bpffs), HostToContainer shows the pod the node's mounts made
// after it started (new network namespaces), None shows neither.
func TestPrivilegedMountPropagation(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	bidi, fromNode := sharedTmpfs(t, true), sharedTmpfs(t, true)
	pod := newPod("propagation", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{hostPathVolume("bidi", bidi), hostPathVolume("node", fromNode)}
		p.Spec.Containers = []corev1.Container{{
			Name: "main", Image: "busybox", Command: []string{"sleep", "3600"},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr(true)},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "bidi", MountPath: "/bidi", MountPropagation: propagation(corev1.MountPropagationBidirectional)},
				{Name: "node", MountPath: "/h2c", MountPropagation: propagation(corev1.MountPropagationHostToContainer)},
				{Name: "node", MountPath: "/none"},
			},
		}}
	})
	if err := env.rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPod(t, env.rt, pod, "Ready", podReady)

	// The pod mounts below its Bidirectional volume; the node sees the mount.
	mustExec(t, env.rt, pod, "main", "sh", "-ec", "mkdir /bidi/pinned; mount -t tmpfs none /bidi/pinned; echo from-pod > /bidi/pinned/f")
	if b, err := os.ReadFile(filepath.Join(bidi, "pinned", "f")); err != nil || string(b) != "from-pod\n" {
		t.Errorf("the pod's mount did not reach the node: %q, %v", b, err)
	}

	// The node mounts after the pod started: HostToContainer sees it, None does not.
	late := filepath.Join(fromNode, "late")
	if err := os.Mkdir(late, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", late, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(late, "marker"), []byte("from-node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, env.rt, pod, "main", "cat", "/h2c/late/marker"); got != "from-node\n" {
		t.Errorf("HostToContainer: %q", got)
	}
	if out, err := execIn(t, env.rt, pod, "main", "cat", "/none/late/marker"); err == nil {
		t.Errorf("None: the node's later mount reached the pod: %q", out)
	}
	// ... and the pod's own mounts below None stay its own.
	mustExec(t, env.rt, pod, "main", "sh", "-ec", "mkdir /none/own; mount -t tmpfs none /none/own")
	if isMountPoint(filepath.Join(fromNode, "own")) {
		t.Error("a mount under a None volume reached the node")
	}
}

// TestPrivilegedBidirectionalNeedsSharedMount: a Bidirectional volume whose
// source is not on a shared mount would silently keep the pod's mounts to
// itself; the pod stays in ContainerCreating saying why, as with the kubelet.
func TestPrivilegedBidirectionalNeedsSharedMount(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	private := sharedTmpfs(t, false)
	pod := newPod("unshared", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{hostPathVolume("bidi", private)}
		p.Spec.Containers = []corev1.Container{{
			Name: "main", Image: "busybox", Command: []string{"sleep", "3600"},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr(true)},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "bidi", MountPath: "/bidi", MountPropagation: propagation(corev1.MountPropagationBidirectional)},
			},
		}}
	})
	if err := env.rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPod(t, env.rt, pod, "a message naming the unshared mount", func(p *corev1.Pod) bool {
		w := containerStatus(p, "main").State.Waiting
		return w != nil && strings.Contains(w.Message, "not shared") && strings.Contains(w.Message, "/bidi")
	})
}

// TestPrivilegedSecurityContextPrivileged: a privileged pod has every
// capability and writable /sys and /proc/sys; another pod has neither file
// system writable.
func TestPrivilegedSecurityContextPrivileged(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	mk := func(name string, privileged bool) *corev1.Pod {
		pod := newPod(name, func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr(privileged)}}}
		})
		if err := env.rt.CreatePod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		waitPod(t, env.rt, pod, "Ready", podReady)
		return pod
	}
	priv, plain := mk("privileged", true), mk("plain", false)

	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var allCaps string
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "CapBnd:") {
			allCaps = strings.TrimSpace(strings.TrimPrefix(l, "CapBnd:"))
		}
	}
	if got := mustExec(t, env.rt, priv, "main", "sh", "-c", "grep CapEff /proc/self/status"); !strings.Contains(got, allCaps) {
		t.Errorf("privileged: %q, want every capability %s", got, allCaps)
	}
	// The pods have network namespaces of their own: their sysctls are theirs.
	mustExec(t, env.rt, priv, "main", "sh", "-ec", "echo 1 > /proc/sys/net/ipv4/ip_forward")
	if got := mustExec(t, env.rt, priv, "main", "cat", "/proc/sys/net/ipv4/ip_forward"); got != "1\n" {
		t.Errorf("privileged: ip_forward %q after writing 1", got)
	}
	mustExec(t, env.rt, priv, "main", "sh", "-ec", "grep -q ' /sys rw,' /proc/self/mountinfo")

	if out, err := execIn(t, env.rt, plain, "main", "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"); err == nil {
		t.Errorf("unprivileged pod wrote a sysctl: %q", out)
	}
	if got := mustExec(t, env.rt, plain, "main", "cat", "/proc/sys/net/ipv4/ip_forward"); got != "0\n" {
		t.Errorf("unprivileged: ip_forward %q", got)
	}
	mustExec(t, env.rt, plain, "main", "sh", "-ec", "grep -q ' /sys ro,' /proc/self/mountinfo")
}

func ephemeralLimit(q string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}}
}

// TestPrivilegedEphemeralStorageEviction: a pod that writes more than its
// containers' ephemeral-storage limits allow, in its root or in an emptyDir
// over its sizeLimit, is evicted (Failed, Evicted, containers stopped, not
// restarted); a pod within its limit keeps running.
func TestPrivilegedEphemeralStorageEviction(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	run := func(name, script string, tweak func(*corev1.Pod)) *corev1.Pod {
		pod := newPod(name, func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox",
				Command:   []string{"sh", "-c", script + "; exec sleep 3600"},
				Resources: ephemeralLimit("4Mi")}}
			if tweak != nil {
				tweak(p)
			}
		})
		if err := env.rt.CreatePod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	within := run("within", "dd if=/dev/zero of=/usr/fill bs=1M count=1", nil)
	// /usr is an overlay: its upper layer is the pod's writable layer.
	root := run("root", "sleep 1; dd if=/dev/zero of=/usr/fill bs=1M count=8", nil)
	tmp := run("tmp", "sleep 1; dd if=/dev/zero of=/tmp/fill bs=1M count=8", nil)
	emptyDir := run("emptydir", "sleep 1; dd if=/dev/zero of=/data/fill bs=1M count=3", func(p *corev1.Pod) {
		size := resource.MustParse("1Mi")
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	})

	for pod, want := range map[*corev1.Pod]string{
		root:     "exceeds the total limit of containers 4Mi",
		tmp:      "exceeds the total limit of containers 4Mi",
		emptyDir: `Usage of EmptyDir volume "data" exceeds the limit "1Mi"`,
	} {
		p := waitPod(t, env.rt, pod, "evicted", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodFailed && containerStatus(p, "main").State.Terminated != nil
		})
		if p.Status.Reason != "Evicted" || !strings.Contains(p.Status.Message, want) {
			t.Errorf("%s: reason %q message %q, want Evicted and %q", pod.Name, p.Status.Reason, p.Status.Message, want)
		}
		if n := containerStatus(p, "main").RestartCount; n != 0 {
			t.Errorf("%s: restarted %d times after eviction", pod.Name, n)
		}
	}
	p := waitPod(t, env.rt, within, "running", podReady)
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("a pod within its limit: phase %s (%s)", p.Status.Phase, p.Status.Message)
	}
}

// TestPrivilegedFSGroup: a container that runs as another user than root
// reads a Secret of mode 0400 through the pod's fsGroup, as hubble-relay
// does; without fsGroup it cannot.
func TestPrivilegedFSGroup(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "certs", Namespace: "default"},
		Data: map[string][]byte{"tls.key": []byte("KEY")}})
	mk := func(name string, fsGroup *int64) *corev1.Pod {
		pod := newPod(name, func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(65532)), RunAsGroup: ptr(int64(65532)), FSGroup: fsGroup}
			p.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr(int32(0o400)),
				Sources:     []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "certs"}}}},
			}}}}
			p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}}}}
		})
		if err := env.rt.CreatePod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		waitPod(t, env.rt, pod, "Ready", podReady)
		return pod
	}
	with, without := mk("with-fsgroup", ptr(int64(65532))), mk("without-fsgroup", nil)
	if got := mustExec(t, env.rt, with, "main", "cat", "/tls/tls.key"); got != "KEY" {
		t.Errorf("with fsGroup: %q", got)
	}
	if got := mustExec(t, env.rt, with, "main", "stat", "-L", "-c", "%a %g", "/tls/tls.key"); got != "440 65532\n" {
		t.Errorf("with fsGroup: mode and group %q, want 440 65532", got)
	}
	if out, err := execIn(t, env.rt, without, "main", "cat", "/tls/tls.key"); err == nil {
		t.Errorf("without fsGroup a non-root user read a 0400 file of root: %q", out)
	}
}

// TestPrivilegedNetnsDir: with NetnsDir the pod's network namespace is
// pinned there as cni-<sandbox id>, as containerd pins them under
// /var/run/netns (where the agent's pod sees them), and unpinned and
// removed when the pod goes.
func TestPrivilegedNetnsDir(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	dir := filepath.Join(t.TempDir(), "netns")
	env.rt.cfg.NetnsDir = dir
	pod := newPod("pinned", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}}
	})
	if err := env.rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPod(t, env.rt, pod, "Ready", podReady)
	pins, _ := filepath.Glob(filepath.Join(dir, "cni-*"))
	if len(pins) != 1 || !isNetns(pins[0]) {
		t.Fatalf("pins in %s: %v, want one pinned namespace", dir, pins)
	}
	var st unix.Stat_t
	if err := unix.Stat(pins[0], &st); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, env.rt, pod, "main", "readlink", "/proc/self/ns/net"); got != fmt.Sprintf("net:[%d]\n", st.Ino) {
		t.Errorf("the pod's netns %q is not the pin's (inode %d)", got, st.Ino)
	}
	if err := env.rt.DeletePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(pins[0]); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there after the pod was deleted", pins[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
