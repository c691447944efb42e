package machine

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/lab/internal/netns"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/record"
)

// privateDir makes dir a private mount of itself: namespace files bind-mounted below it
// must not propagate into the node mount namespaces they describe.
func (b Builder) privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := b.Record.Add(record.Entry{Kind: record.Mount, Path: dir}); err != nil {
		return err
	}
	if err := unix.Mount(dir, dir, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dir, err)
	}
	if err := unix.Mount("none", dir, "none", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make %s private: %w", dir, err)
	}
	return nil
}

// nodeNamespaces makes the node's mount and UTS namespaces. A child process (node-init)
// is born in them, prepares the mounts and hostname, and waits while this process pins
// its namespaces to files; then it exits and the namespaces live on in the files.
func (b Builder) nodeNamespaces(n plan.Node) error {
	args := []string{"node-init", "--hostname", n.Name}
	for _, m := range NodeMounts {
		args = append(args, "--bind", filepath.Join(n.Dir, m.Sub)+":"+m.Target)
	}
	cmd := exec.Command(b.Self, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := netns.Do(n.Netns, cmd.Start); err != nil {
		return fmt.Errorf("start node-init: %w", err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		return fmt.Errorf("node-init did not get ready: %q %v", line, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
	}
	for _, ns := range []struct{ kind, file string }{{"mnt", n.MntNS}, {"uts", n.UTSNS}} {
		if err := b.Record.Add(record.Entry{Kind: record.NSFile, Path: ns.file}); err != nil {
			return err
		}
		if err := os.WriteFile(ns.file, nil, 0o444); err != nil {
			return err
		}
		src := fmt.Sprintf("/proc/%d/ns/%s", cmd.Process.Pid, ns.kind)
		if err := unix.Mount(src, ns.file, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("pin %s namespace: %w", ns.kind, err)
		}
	}
	return nil
}

// NodeInit is the body of `cilium-lab node-init`: it runs as the first process of a new
// mount and UTS namespace and leaves them ready for a node.
func NodeInit(hostname string, binds []string) error {
	// Nothing mounted here may reach the host: from now on mounts only flow inwards.
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / rslave: %w", err)
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if err := unix.Mount("bpffs", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount bpffs: %w", err)
	}
	// Shared within the node, as on a real node: an agent pod's Bidirectional
	// volume of it hands what the agent mounts there back to the node.
	if err := unix.Mount("", "/sys/fs/bpf", "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make bpffs shared: %w", err)
	}
	for _, bind := range binds {
		src, dst, ok := cut(bind)
		if !ok {
			return fmt.Errorf("bind %q: want SRC:DST", bind)
		}
		if err := unix.Mount(src, dst, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, dst, err)
		}
	}
	// Shared, as on a real node, so that a namespace pinned after an agent
	// pod started appears in its HostToContainer volume.
	if err := unix.Mount("", "/var/run/netns", "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make /var/run/netns shared: %w", err)
	}
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		return err
	}
	// Hold the namespaces until the parent has pinned them and closes our stdin.
	_, err := io.Copy(io.Discard, os.Stdin)
	if errors.Is(err, os.ErrClosed) {
		err = nil
	}
	return err
}

func cut(s string) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return s[:i], s[i+1:], s[:i] != "" && s[i+1:] != ""
		}
	}
	return "", "", false
}
