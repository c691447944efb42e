package podruntime

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// storageLimits are what the kubelet's eviction manager holds a pod to: the
// sum of its containers' ephemeral-storage limits (zero: none), and each
// disk emptyDir's sizeLimit.
type storageLimits struct {
	Pod      *resource.Quantity
	EmptyDir map[string]resource.Quantity
}

func podStorageLimits(pod *corev1.Pod) storageLimits {
	l := storageLimits{EmptyDir: map[string]resource.Quantity{}}
	var sum resource.Quantity
	found := false
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			sum.Add(q)
			found = true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		// Sidecars run beside the containers; other init containers before them.
		if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && c.RestartPolicy != nil &&
			*c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum.Add(q)
			found = true
		}
	}
	if found {
		l.Pod = &sum
	}
	for _, v := range pod.Spec.Volumes {
		if ed := v.EmptyDir; ed != nil && ed.Medium != corev1.StorageMediumMemory && ed.SizeLimit != nil {
			l.EmptyDir[v.Name] = *ed.SizeLimit
		}
	}
	return l
}

func (l storageLimits) any() bool { return l.Pod != nil || len(l.EmptyDir) > 0 }

// watchStorage measures the pod's local storage on a period, as the kubelet's
// eviction manager does, and evicts the pod once it uses more than allowed:
// its writable root (the overlays' upper layer and the root, /tmp and /run
// tmpfs), its disk emptyDirs and its logs. Memory emptyDirs count as memory.
func (p *podState) watchStorage(l storageLimits) {
	t := time.NewTicker(p.rt.cfg.StorageCheck)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		finished, sb := p.finished, p.sandbox
		p.mu.Unlock()
		if finished || sb == nil {
			return
		}
		if msg := p.storageExceeded(sb.pid, l); msg != "" {
			p.rt.log.Info("evicting pod", "pod", p.key(), "reason", msg)
			p.fail("Evicted", msg, 0)
			return
		}
	}
}

// storageExceeded says why the pod is over a limit, or "".
func (p *podState) storageExceeded(sandboxPID int, l storageLimits) string {
	var total int64
	for _, name := range slices.Sorted(diskEmptyDirs(p.pod.Spec.Volumes)) {
		used := duBytes(filepath.Join(p.dir, "volumes", name))
		if lim, ok := l.EmptyDir[name]; ok && used > lim.Value() {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q.", name, lim.String())
		}
		total += used
	}
	total += duBytes(filepath.Join(p.dir, "logs"))
	total += p.writableLayer(sandboxPID)
	if l.Pod != nil && total > l.Pod.Value() {
		return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s.", l.Pod.String())
	}
	return ""
}

// diskEmptyDirs are the names of the pod's disk emptyDirs.
func diskEmptyDirs(vols []corev1.Volume) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range vols {
			if v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory {
				if !yield(v.Name) {
					return
				}
			}
		}
	}
}

// writableLayer is what the pod wrote outside its volumes: the sandbox's root,
// /tmp and /run tmpfs and the overlays' shared upper layer (an overlay's statfs
// is its upper file system's). Volumes mounted over those paths are not counted
// here.
func (p *podState) writableLayer(sandboxPID int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", sandboxPID))
	if err != nil {
		return 0
	}
	var used int64
	overlay := false
	seen := map[string]bool{}
	for _, e := range parseMountinfo(string(data)) {
		if seen[e.Point] {
			continue
		}
		seen[e.Point] = true
		switch {
		case e.FSType == "tmpfs" && (e.Point == "/" || e.Point == "/tmp" || e.Point == "/run"):
		case e.FSType == "overlay" && !overlay:
			overlay = true
		default:
			continue
		}
		var st unix.Statfs_t
		if unix.Statfs(fmt.Sprintf("/proc/%d/root%s", sandboxPID, e.Point), &st) == nil {
			used += int64(st.Blocks-st.Bfree) * st.Bsize
		}
	}
	return used
}

// duBytes is the space the files under dir take, as du counts it.
func duBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if path != dir && d.IsDir() && isMountPoint(path) {
			return fs.SkipDir
		}
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil {
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// isMountPoint says whether dir is on another device than its parent.
func isMountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}
