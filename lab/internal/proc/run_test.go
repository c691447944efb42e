package proc

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCommandNamespaces(t *testing.T) {
	cmd := Command(Spec{Path: "/bin/agent", Args: []string{"-v"}, Dir: "/w",
		Namespaces: Namespaces{Net: "/run/netns/n1", Mnt: "/s/n1.mnt", UTS: "/s/n1.uts"}, Env: []string{"A=1"}})
	want := []string{"nsenter", "--net=/run/netns/n1", "--mount=/s/n1.mnt", "--uts=/s/n1.uts", "--wd=/w", "--", "/bin/agent", "-v"}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("args %q, want %q", cmd.Args, want)
	}
	if !slices.Contains(cmd.Env, "A=1") || cmd.Dir != "" {
		t.Errorf("env %q dir %q", cmd.Env, cmd.Dir)
	}
	plain := Command(Spec{Path: "/bin/true", Dir: "/tmp"})
	if !slices.Equal(plain.Args, []string{"/bin/true"}) || plain.Dir != "/tmp" {
		t.Errorf("without namespaces: %q in %q", plain.Args, plain.Dir)
	}
}

func waitFor(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSupervisorRestartsAndStops(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "crash.log")
	s := &Supervisor{Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx, Spec{Name: "crash", Path: "/bin/sh", Args: []string{"-c", "echo boom; exit 3"}, LogFile: log}, time.Second)
	s.Start(ctx, Spec{Name: "steady", Path: "/bin/sleep", Args: []string{"600"}}, time.Second)

	state := func(name string) State {
		for _, st := range s.States() {
			if st.Name == name {
				return st
			}
		}
		return State{}
	}
	waitFor(t, "a restart of the crashing process", func() bool { return state("crash").Restarts >= 1 })
	if st := state("crash"); !strings.Contains(st.LastExit, "exit status 3") {
		t.Errorf("last exit %q", st.LastExit)
	}
	b, _ := os.ReadFile(log)
	if strings.Count(string(b), "boom") < 1 || !strings.Contains(string(b), "starting crash") {
		t.Errorf("log:\n%s", b)
	}
	waitFor(t, "the steady process", func() bool { return state("steady").Running })
	pid := state("steady").PID

	cancel()
	s.Wait()
	if st := state("steady"); st.Running || st.PID != 0 {
		t.Errorf("after stop: %+v", st)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z") {
			t.Errorf("process %d still running after stop", pid)
		}
	}
}
