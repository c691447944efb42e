package record

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// System removes resources from the running machine.
type System struct {
	// Wait bounds how long a killed process or cgroup may take to go away.
	Wait time.Duration
}

// Undo implements Undoer.
func (s System) Undo(e Entry) error {
	switch e.Kind {
	case Dir:
		return os.RemoveAll(e.Path)
	case EmptyDir:
		err := unix.Rmdir(e.Path)
		if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTEMPTY) {
			return nil
		}
		return err
	case Mount:
		return detach(e.Path)
	case NSFile:
		if err := detach(e.Path); err != nil {
			return err
		}
		if err := os.Remove(e.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	case Cgroup:
		return s.removeCgroup(e.Path)
	case Process:
		return s.kill(e.PID, e.Start)
	}
	return fmt.Errorf("unknown kind %q", e.Kind)
}

// detach unmounts every mount stacked on path (lazily, so busy mounts go too).
func detach(path string) error {
	for range 16 {
		err := unix.Unmount(path, unix.MNT_DETACH)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		default:
			return err
		}
	}
	return fmt.Errorf("%s: still mounted after 16 unmounts", path)
}

func (s System) removeCgroup(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	deadline := time.Now().Add(s.wait())
	for {
		// Processes leave asynchronously after cgroup.kill; rmdir says EBUSY until then.
		err := rmdirTree(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func rmdirTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := rmdirTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return unix.Rmdir(dir)
}

func (s System) kill(pid int, start uint64) error {
	got, err := StartTime(pid)
	if err != nil || got != start {
		return nil // gone, or the PID now belongs to someone else
	}
	if err := unix.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	deadline := time.Now().Add(s.wait())
	for time.Now().Before(deadline) {
		if got, err := StartTime(pid); err != nil || got != start {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("process %d still alive", pid)
}

func (s System) wait() time.Duration {
	if s.Wait > 0 {
		return s.Wait
	}
	return 10 * time.Second
}

// StartTime returns the start time of a process in clock ticks since boot. A zombie
// counts as gone.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: parse after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("pid %d: malformed stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is the state (field 3), so field 22 is fields[19].
	if len(fields) < 20 {
		return 0, fmt.Errorf("pid %d: short stat", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, os.ErrNotExist
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
