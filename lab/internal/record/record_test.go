package record

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

func TestAddRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record.json")
	r := Open(path)
	want := []Entry{
		{Kind: Dir, Path: "/x"},
		{Kind: NSFile, Path: "/run/netns/lab-node1"},
		{Kind: Process, PID: 42, Start: 7},
	}
	for _, e := range want {
		if err := r.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}

	// A crash in the middle of an append leaves a torn last line: ignore it.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"kind":"mou`)
	f.Close()
	if got, err = Read(path); err != nil || len(got) != 3 {
		t.Fatalf("torn tail: %v %v", got, err)
	}

	// Damage in the middle is not a torn tail: say so.
	os.WriteFile(path, []byte("{\"kind\":\"dir\",\"path\":\"/a\"}\nnot json\n{\"kind\":\"dir\",\"path\":\"/b\"}\n"), 0o600)
	if _, err := Read(path); err == nil {
		t.Fatal("damaged journal read without error")
	}

	if got, err := Read(filepath.Join(t.TempDir(), "none")); err != nil || got != nil {
		t.Fatalf("missing journal: %v %v", got, err)
	}
}

type fakeUndoer struct {
	done []Entry
	fail map[string]bool
}

func (f *fakeUndoer) Undo(e Entry) error {
	f.done = append(f.done, e)
	if f.fail[e.Path] {
		return errors.New("busy")
	}
	return nil
}

func TestTeardownOrder(t *testing.T) {
	entries := []Entry{
		{Kind: Dir, Path: "/state"},
		{Kind: NSFile, Path: "/run/netns/a"},
		{Kind: Mount, Path: "/state/ns"},
		{Kind: NSFile, Path: "/run/netns/a"}, // recorded twice (an `up` retried): undone once
		{Kind: Cgroup, Path: "/cg"},
	}
	u := &fakeUndoer{fail: map[string]bool{"/state/ns": true}}
	err := Teardown(entries, u)
	if err == nil {
		t.Fatal("a failed removal was not reported")
	}
	want := []Entry{entries[4], entries[3], entries[2], entries[0]}
	if !reflect.DeepEqual(u.done, want) {
		t.Fatalf("undo order %v, want %v (newest first, each once, carrying on past errors)", u.done, want)
	}
}

func TestSystemUndo(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	os.MkdirAll(filepath.Join(full, "sub"), 0o755)
	os.WriteFile(filepath.Join(full, "sub", "f"), nil, 0o600)
	keep := filepath.Join(dir, "keep")
	os.MkdirAll(keep, 0o755)
	os.WriteFile(filepath.Join(keep, "user-file"), nil, 0o600)

	s := System{}
	if err := s.Undo(Entry{Kind: Dir, Path: full}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(full); !os.IsNotExist(err) {
		t.Fatalf("dir still there: %v", err)
	}
	// An EmptyDir that someone filled meanwhile is left alone.
	if err := s.Undo(Entry{Kind: EmptyDir, Path: keep}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(keep, "user-file")); err != nil {
		t.Fatalf("non-empty mount point removed: %v", err)
	}
	// Undoing what is already gone is fine: down must be safe to run twice.
	for _, e := range []Entry{{Kind: Dir, Path: full}, {Kind: EmptyDir, Path: full}, {Kind: NSFile, Path: full}, {Kind: Cgroup, Path: full}} {
		if err := s.Undo(e); err != nil {
			t.Errorf("undo missing %s: %v", e, err)
		}
	}
}

func TestSystemKillChecksStartTime(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	go cmd.Wait() // reap, so the killed process does not linger as a zombie
	start, err := StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// A recorded start time that does not match means the PID was reused: hands off.
	if err := (System{}).Undo(Entry{Kind: Process, PID: cmd.Process.Pid, Start: start + 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := StartTime(cmd.Process.Pid); err != nil {
		t.Fatal("a process with another start time was killed")
	}
	if err := (System{}).Undo(Entry{Kind: Process, PID: cmd.Process.Pid, Start: start}); err != nil {
		t.Fatal(err)
	}
	if _, err := StartTime(cmd.Process.Pid); err == nil {
		t.Fatal("recorded process still alive")
	}
}
