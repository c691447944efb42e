package browser

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func launchFirefox(t *testing.T, opts Options) *Firefox {
	t.Helper()
	if _, err := findFirefox(""); errors.Is(err, ErrNoFirefox) {
		t.Skip(err)
	}
	start := time.Now()
	f, err := LaunchFirefox(testContext(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("launched in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func TestFirefoxClose(t *testing.T) {
	// Everything Firefox makes goes into LaunchFirefox's directory, which
	// goes.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	f := launchFirefox(t, Options{})
	ctx := testContext(t)
	pid := f.cmd.Process.Pid
	if err := f.Eval(ctx, "1", nil); err != nil {
		t.Fatal(err)
	}
	if alive := processes(pid, f.dir); len(alive) < 2 {
		t.Fatalf("before Close: processes %v, want Firefox and its content processes", alive)
	}

	start := time.Now()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("closed in %s", time.Since(start).Round(time.Millisecond))
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("after Close: %v left in the temporary directory (%v)", left, err)
	}
	if alive := processes(pid, f.dir); len(alive) > 0 {
		t.Errorf("after Close: processes %v still alive", alive)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := f.Eval(ctx, "1", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Eval after Close: got %v, want ErrClosed", err)
	}
	if errs := f.Errors(); len(errs) > 0 {
		t.Errorf("Errors() after Close: %q, want none", errs)
	}
}

func TestLaunchFirefoxFails(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("FIREFOX", "")

	// A binary that exits at once: the error says so, and nothing stays.
	_, err := LaunchFirefox(testContext(t), Options{Binary: "false"})
	if err == nil || errors.Is(err, ErrNoFirefox) || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("LaunchFirefox of false: got %v, want its exit status", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("after a failed LaunchFirefox: %v left in the temporary directory", left)
	}

	// A binary asked for by name must exist: no skip hides a typo.
	_, err = LaunchFirefox(testContext(t), Options{Binary: filepath.Join(tmp, "firefox")})
	if err == nil || errors.Is(err, ErrNoFirefox) {
		t.Errorf("LaunchFirefox of a missing path: got %v, want an error other than ErrNoFirefox", err)
	}

	// Nothing asked for and nothing on $PATH: the error tests skip on.
	t.Setenv("PATH", tmp)
	if _, err := LaunchFirefox(testContext(t), Options{}); !errors.Is(err, ErrNoFirefox) {
		t.Errorf("LaunchFirefox without firefox on $PATH: got %v, want ErrNoFirefox", err)
	}
	for _, e := range Engines() {
		if e.Name == "firefox" && !errors.Is(e.missing(), ErrNoFirefox) {
			t.Errorf("firefox engine's missing() = %v without firefox on $PATH, want ErrNoFirefox", e.missing())
		}
	}
}
