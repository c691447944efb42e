package podruntime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// sandboxSpec is what the runtime tells pod-init to build. It is written as JSON into
// the pod directory and named on pod-init's command line.
type sandboxSpec struct {
	// Root is the directory the pod root (a tmpfs) is mounted on.
	Root string `json:"root"`
	// Scratch holds the overlays' upper and work directories (a tmpfs, outside every
	// lowerdir).
	Scratch string `json:"scratch"`
	// Hostname is set when the sandbox has its own UTS namespace.
	Hostname string `json:"hostname,omitempty"`
	// NewNet tells pod-init it owns a fresh network namespace whose lo it must bring up.
	NewNet bool `json:"newNet,omitempty"`
	// Mounts are made in order after the base filesystem: image files, the pod's /etc
	// files, then volumes.
	Mounts []mountSpec `json:"mounts"`
	// Privileged is set when a container of the pod is privileged: /sys and
	// /proc/sys are writable (the namespaces' mounts are shared by the
	// pod's containers, so one privileged container opens them for all).
	Privileged bool `json:"privileged,omitempty"`
}

// rootEntry is what the pod root does with one top-level entry of the host's root.
type rootEntry struct {
	Name    string
	Overlay bool   // overlay of the host directory, writable per pod
	Link    string // symlink target, as on the host
}

// overlaidDirs are the host's top-level directories a pod root shares, copy-on-write.
var overlaidDirs = []string{"usr", "etc", "opt", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// planRoot decides, from the host's top-level entries, which become overlays and which
// symlinks (merged-/usr systems have /bin -> usr/bin). lstat is os.Lstat in production.
func planRoot(lstat func(string) (os.FileInfo, error), readlink func(string) (string, error)) []rootEntry {
	var out []rootEntry
	for _, name := range overlaidDirs {
		fi, err := lstat("/" + name)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := readlink("/" + name)
			if err != nil {
				continue
			}
			out = append(out, rootEntry{Name: name, Link: target})
		case fi.IsDir():
			out = append(out, rootEntry{Name: name, Overlay: true})
		}
	}
	return out
}

// SandboxMain is the pod sandbox ("cilium-lab pod-init SPEC"): started by the runtime
// in fresh mount, IPC and (unless host network) network and UTS namespaces, it builds
// the pod root, pivots into it, reports readiness on file descriptor 3 and then holds
// the namespaces open until SIGTERM. It returns the process exit code.
func SandboxMain(args []string) int {
	ready := os.NewFile(3, "ready")
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: pod-init SPEC")
		return 2
	}
	if err := setupSandbox(args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "pod-init:", err)
		if ready != nil {
			fmt.Fprintf(ready, "error: %v\n", err)
		}
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGTERM, unix.SIGINT)
	signal.Ignore(unix.SIGHUP, unix.SIGPIPE)
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
	}
	<-sig
	return 0
}

func setupSandbox(specPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec sandboxSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("parse %s: %w", specPath, err)
	}
	// The pod's own network namespace, set up while /proc/sys is still the
	// node's writable one: the root built below may make it read-only.
	if spec.NewNet {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("lo up: %w", err)
		}
		if err := podNetSysctls(); err != nil {
			return err
		}
	}
	// Bidirectional volumes are cloned while this namespace's copies of the
	// node's mounts are still their peers: a clone of a shared mount joins
	// its peer group, so what the pod mounts below it reaches the node.
	clones, err := cloneBidirectional(spec.Mounts)
	if err != nil {
		return err
	}
	defer func() {
		for _, fd := range clones {
			unix.Close(fd)
		}
	}()
	// Nothing else this process mounts may reach the node or the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / rslave: %w", err)
	}
	if err := buildRoot(&spec); err != nil {
		return err
	}
	for i, m := range spec.Mounts {
		if fd, ok := clones[i]; ok {
			err = attachClone(spec.Root, m, fd)
		} else {
			err = mountInRoot(spec.Root, m)
		}
		if err != nil {
			return err
		}
	}
	if err := pivotRoot(spec.Root); err != nil {
		return err
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	return nil
}

// podNetSysctls sets what containerd (2.0 on) sets in a pod's own network
// namespace: any user may bind low ports and send pings there, so that images
// with a non-root USER that serve port 53 or 80 (CoreDNS runs as 65532) work as
// they do on a cluster. A host-network pod keeps the node's settings.
func podNetSysctls() error {
	for key, value := range map[string]string{
		"net/ipv4/ip_unprivileged_port_start": "0",
		"net/ipv4/ping_group_range":           "0 2147483647",
	} {
		if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", key, err)
		}
	}
	return nil
}

func buildRoot(spec *sandboxSpec) error {
	for _, d := range []string{spec.Root, spec.Scratch} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, "mode=755"); err != nil {
			return fmt.Errorf("mount tmpfs %s: %w", d, err)
		}
	}
	root := spec.Root
	for _, e := range planRoot(os.Lstat, os.Readlink) {
		dst := filepath.Join(root, e.Name)
		if !e.Overlay {
			if err := os.Symlink(e.Link, dst); err != nil {
				return err
			}
			continue
		}
		upper := filepath.Join(spec.Scratch, e.Name, "upper")
		work := filepath.Join(spec.Scratch, e.Name, "work")
		for _, d := range []string{dst, upper, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		opts := fmt.Sprintf("lowerdir=/%s,upperdir=%s,workdir=%s", e.Name, upper, work)
		if err := unix.Mount("overlay", dst, "overlay", 0, opts); err != nil {
			return fmt.Errorf("overlay /%s: %w", e.Name, err)
		}
	}
	dirs := map[string]os.FileMode{
		"var": 0o755, "var/lib": 0o755, "var/log": 0o755, "var/cache": 0o755, "var/tmp": 0o1777,
		"root": 0o700, "home": 0o755, "mnt": 0o755, "srv": 0o755,
		"tmp": 0o1777, "run": 0o755, "proc": 0o555, "sys": 0o555, "dev": 0o755,
	}
	for d, mode := range dirs {
		p := filepath.Join(root, d)
		if err := os.MkdirAll(p, mode); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	if err := os.Symlink("../run", filepath.Join(root, "var/run")); err != nil {
		return err
	}
	type fsMount struct {
		src, dst, fstype string
		flags            uintptr
		data             string
	}
	// As a container runtime does: /sys read-only and /proc/sys a read-only
	// view unless the pod is privileged (an agent sets sysctls and writes
	// to /sys).
	sysFlags := uintptr(unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV)
	if !spec.Privileged {
		sysFlags |= unix.MS_RDONLY
	}
	mounts := []fsMount{
		{"tmpfs", "tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"tmpfs", "run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=755"},
		{"proc", "proc", "proc", unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV, ""},
		{"sysfs", "sys", "sysfs", sysFlags, ""},
		{"tmpfs", "dev", "tmpfs", unix.MS_NOSUID, "mode=755"},
	}
	for _, m := range mounts {
		if err := unix.Mount(m.src, filepath.Join(root, m.dst), m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s on /%s: %w", m.src, m.dst, err)
		}
	}
	if !spec.Privileged {
		procSys := filepath.Join(root, "proc/sys")
		if err := unix.Mount(procSys, procSys, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /proc/sys: %w", err)
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV)
		if err := unix.Mount("", procSys, "", flags, ""); err != nil {
			return fmt.Errorf("make /proc/sys read-only: %w", err)
		}
	}
	return buildDev(filepath.Join(root, "dev"))
}

// hostDevices are the device nodes a pod's /dev gets from the host, like a
// container runtime's default set. /dev itself is the pod's own tmpfs, so nothing a
// container creates there reaches the host's /dev.
var hostDevices = []string{"null", "zero", "full", "random", "urandom", "tty", "net/tun", "fuse"}

func buildDev(dev string) error {
	for _, d := range hostDevices {
		if _, err := os.Stat("/dev/" + d); err != nil {
			continue
		}
		if err := mountInRoot(dev, mountSpec{Source: "/dev/" + d, Target: "/" + d, IsFile: true}); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm", "mqueue"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	// The host's ptys, so a terminal the runtime opens for exec resolves inside the pod.
	if err := unix.Mount("/dev/pts", filepath.Join(dev, "pts"), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /dev/pts: %w", err)
	}
	// shm and mqueue belong to the pod's IPC namespace.
	if err := unix.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	// mqueue is optional: not every kernel has it.
	_ = unix.Mount("mqueue", filepath.Join(dev, "mqueue"), "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	links := map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "core": "/proc/kcore",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

// mountInRoot makes one mount inside the pod root. Targets resolve inside the root:
// a symlink in the image (e.g. /var/run -> ../run) must not lead to the host's tree.
func mountInRoot(root string, m mountSpec) error {
	dst, err := securejoin.SecureJoin(root, m.Target)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", m.Target, err)
	}
	if m.IsFile {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
		f.Close()
	} else if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("mount point %s: %w", m.Target, err)
	}
	if m.Tmpfs {
		if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", m.Target, err)
		}
	} else if err := unix.Mount(m.Source, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", m.Source, m.Target, err)
	}
	// The kubelet's None is private; HostToContainer receives the node's
	// new mounts below the source (a bind of this namespace's slave copy is
	// a slave of the same master, so it stays one).
	prop := uintptr(unix.MS_PRIVATE)
	if m.Propagation == string(corev1.MountPropagationHostToContainer) {
		prop = unix.MS_SLAVE
	}
	if err := unix.Mount("", dst, "", unix.MS_REC|prop, ""); err != nil {
		return fmt.Errorf("set propagation of %s: %w", m.Target, err)
	}
	return readOnly(dst, m)
}

func readOnly(dst string, m mountSpec) error {
	if !m.ReadOnly {
		return nil
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	err := unix.MountSetattr(-1, dst, unix.AT_RECURSIVE, attr)
	if errors.Is(err, unix.ENOSYS) {
		err = unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	if err != nil {
		return fmt.Errorf("make %s read-only: %w", m.Target, err)
	}
	return nil
}

// cloneBidirectional clones the source of every Bidirectional mount, by its
// index in mounts, as a detached tree.
func cloneBidirectional(mounts []mountSpec) (map[int]int, error) {
	out := map[int]int{}
	for i, m := range mounts {
		if m.Propagation != string(corev1.MountPropagationBidirectional) {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			for _, fd := range out {
				unix.Close(fd)
			}
			return nil, fmt.Errorf("clone %s for %s: %w", m.Source, m.Target, err)
		}
		out[i] = fd
	}
	return out, nil
}

// attachClone puts a tree from cloneBidirectional at its target in the root.
func attachClone(root string, m mountSpec, fd int) error {
	dst, err := securejoin.SecureJoin(root, m.Target)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", m.Target, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("mount point %s: %w", m.Target, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s on %s: %w", m.Source, m.Target, err)
	}
	return readOnly(dst, m)
}

// pivotRoot swaps the root and drops the old one, so the sandbox (and everything that
// joins its mount namespace later) sees only the pod root.
func pivotRoot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return unix.Chdir("/")
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
