package browser

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func launch(t *testing.T, opts Options) *Browser {
	t.Helper()
	Require(t)
	start := time.Now()
	b, err := Launch(testContext(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("launched in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// TestMetrics covers what only Chromium's driver has; TestPage covers
// what both engines do.
func TestMetrics(t *testing.T) {
	b := launch(t, Options{Width: 640, Height: 480})
	ctx := testContext(t)
	if err := b.Navigate(ctx, serve(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := b.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m["JSHeapUsedSize"] <= 0 || m["Nodes"] <= 0 {
		t.Errorf("Metrics() = %v, want JSHeapUsedSize and Nodes above 0", m)
	}
}

func TestClose(t *testing.T) {
	// Everything Chromium makes goes into Launch's directory, which goes.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	b := launch(t, Options{})
	ctx := testContext(t)
	pid := b.cmd.Process.Pid
	if err := b.Eval(ctx, "1", nil); err != nil {
		t.Fatal(err)
	}
	if alive := processes(pid, b.dir); len(alive) < 2 {
		t.Fatalf("before Close: processes %v, want the browser and its helpers", alive)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("after Close: %v left in the temporary directory (%v)", left, err)
	}
	if alive := processes(pid, b.dir); len(alive) > 0 {
		t.Errorf("after Close: processes %v still alive", alive)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := b.Eval(ctx, "1", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Eval after Close: got %v, want ErrClosed", err)
	}
}

// processes returns the live processes of the group pgid, or with dir on
// their command line: Chromium's crash handler leaves the group.
func processes(pgid int, dir string) []int {
	return liveProcesses(func(g int, cmdline string) bool {
		return g == pgid || strings.Contains(cmdline, dir+"/")
	})
}

func TestLaunchFails(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("CHROMIUM", "")

	// A binary that exits at once: the error says so, and nothing stays.
	_, err := Launch(testContext(t), Options{Binary: "false"})
	if err == nil || errors.Is(err, ErrNoBrowser) || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("Launch of false: got %v, want its exit status", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("after a failed Launch: %v left in the temporary directory", left)
	}

	// A binary asked for by name must exist: no skip hides a typo.
	_, err = Launch(testContext(t), Options{Binary: filepath.Join(tmp, "chromium")})
	if err == nil || errors.Is(err, ErrNoBrowser) {
		t.Errorf("Launch of a missing path: got %v, want an error other than ErrNoBrowser", err)
	}

	// Nothing asked for and nothing on $PATH: the error tests skip on.
	t.Setenv("PATH", tmp)
	if _, err := Launch(testContext(t), Options{}); !errors.Is(err, ErrNoBrowser) {
		t.Errorf("Launch without chromium on $PATH: got %v, want ErrNoBrowser", err)
	}
}
