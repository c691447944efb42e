package proc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A supervised process with a Cgroup is born in it, and so is everything it starts
// (a node agent's pods).
func TestPrivilegedSupervisorCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a cgroup")
	}
	root := ""
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.subtree_control")); err == nil {
			root = dir
			break
		}
	}
	if root == "" {
		t.Fatal("no cgroup v2 hierarchy mounted: the lab needs one (README)")
	}
	name := fmt.Sprintf("cilium-lab-proctest-%d", os.Getpid())
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := unix.Rmdir(dir)
			if err == nil || errors.Is(err, unix.ENOENT) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove %s: %v", dir, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	childPID := filepath.Join(t.TempDir(), "child")
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{Log: slog.New(slog.DiscardHandler)}
	s.Start(ctx, Spec{Name: "parent", Path: "/bin/sh", Cgroup: dir,
		Args: []string{"-c", "sleep 60 & echo $! > " + childPID + "; wait"}}, time.Second)
	defer func() { cancel(); s.Wait() }()

	var parent, child int
	waitFor(t, "parent and child", func() bool {
		parent = s.States()[0].PID
		b, _ := os.ReadFile(childPID)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return parent > 0 && child > 0
	})
	for _, pid := range []int{parent, child} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "0::/"+name+"\n") {
			t.Errorf("process %d is in\n%s\nwant 0::/%s", pid, b, name)
		}
	}
}
