package proc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command returns the command that starts spec: through nsenter when the spec names
// namespaces, so the process is born inside them.
func Command(spec Spec) *exec.Cmd {
	path, args := spec.Path, spec.Args
	if !spec.Namespaces.Empty() {
		ns := []string{}
		if spec.Namespaces.Net != "" {
			ns = append(ns, "--net="+spec.Namespaces.Net)
		}
		if spec.Namespaces.Mnt != "" {
			ns = append(ns, "--mount="+spec.Namespaces.Mnt)
		}
		if spec.Namespaces.UTS != "" {
			ns = append(ns, "--uts="+spec.Namespaces.UTS)
		}
		if spec.Dir != "" {
			ns = append(ns, "--wd="+spec.Dir)
		}
		args = append(append(ns, "--", path), args...)
		path = "nsenter"
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}, spec.Env...)
	if spec.Namespaces.Empty() {
		cmd.Dir = spec.Dir
	}
	// The lab's processes die with their supervisor; a new supervisor starts them again.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// IntoCgroup makes cmd start inside the cgroup v2 directory dir (clone3 with
// CLONE_INTO_CGROUP), so not even its first instruction runs elsewhere and nothing
// it forks can escape. The caller closes the returned directory after Start.
func IntoCgroup(cmd *exec.Cmd, dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(f.Fd())
	return f, nil
}

// State is what a supervised process is doing.
type State struct {
	Name     string    `json:"name"`
	PID      int       `json:"pid,omitempty"`
	Running  bool      `json:"running"`
	Restarts int       `json:"restarts"`
	Since    time.Time `json:"since"`
	LastExit string    `json:"lastExit,omitempty"`
}

// Supervisor keeps processes running, restarting them with back-off when they exit.
type Supervisor struct {
	Log *slog.Logger
	// OnChange is called (from any goroutine) when a process starts or exits.
	OnChange func()

	mu     sync.Mutex
	states map[string]*State
	wg     sync.WaitGroup
}

// Start runs spec until ctx is done; then it sends SIGTERM, and SIGKILL after grace.
func (s *Supervisor) Start(ctx context.Context, spec Spec, grace time.Duration) {
	s.mu.Lock()
	if s.states == nil {
		s.states = map[string]*State{}
	}
	st := &State{Name: spec.Name}
	s.states[spec.Name] = st
	s.mu.Unlock()

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		backoff := 500 * time.Millisecond
		for ctx.Err() == nil {
			started := time.Now()
			err := s.runOnce(ctx, spec, st, grace)
			if ctx.Err() != nil {
				return
			}
			s.Log.Warn("process exited", "name", spec.Name, "error", err)
			if time.Since(started) > time.Minute {
				backoff = 500 * time.Millisecond
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 30*time.Second)
			s.update(st, func(st *State) { st.Restarts++ })
		}
	}()
}

func (s *Supervisor) runOnce(ctx context.Context, spec Spec, st *State, grace time.Duration) error {
	cmd := Command(spec)
	if spec.LogFile != "" {
		f, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			s.update(st, func(st *State) { st.LastExit = err.Error() })
			return err
		}
		defer f.Close()
		fmt.Fprintf(f, "--- %s starting %s\n", time.Now().Format(time.RFC3339), spec.Name)
		cmd.Stdout, cmd.Stderr = f, f
	}
	if spec.Cgroup != "" {
		cg, err := IntoCgroup(cmd, spec.Cgroup)
		if err != nil {
			s.update(st, func(st *State) { st.LastExit = err.Error() })
			return err
		}
		defer cg.Close()
	}
	if err := cmd.Start(); err != nil {
		s.update(st, func(st *State) { st.LastExit = err.Error() })
		return err
	}
	s.update(st, func(st *State) {
		st.PID, st.Running, st.Since = cmd.Process.Pid, true, time.Now()
	})
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(grace):
			cmd.Process.Kill()
			err = <-done
		}
	}
	exit := "exited"
	if err != nil {
		exit = err.Error()
	}
	s.update(st, func(st *State) {
		st.PID, st.Running, st.Since, st.LastExit = 0, false, time.Now(), exit
	})
	return err
}

func (s *Supervisor) update(st *State, fn func(*State)) {
	s.mu.Lock()
	fn(st)
	s.mu.Unlock()
	if s.OnChange != nil {
		s.OnChange()
	}
}

// States returns a snapshot of every process.
func (s *Supervisor) States() []State {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]State, 0, len(s.states))
	for _, st := range s.states {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b State) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Wait returns once every process has stopped (after their context was cancelled).
func (s *Supervisor) Wait() { s.wg.Wait() }
