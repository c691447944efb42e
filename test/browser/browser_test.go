package browser

import (
	"context"
	"errors"
	"image"
	_ "image/png" // image.DecodeConfig reads the screenshots
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The button changes the page a little later, so that WaitFor has
// something to wait for; the file input shows what it was given.
const testPage = `<!doctype html>
<title>browser test</title>
<p id="count">0</p>
<button id="inc" onclick="setTimeout(() => { count.textContent = Number(count.textContent) + 1 }, 50)">+1</button>
<button id="boom" onclick="throw new Error('boom from a click')">boom</button>
<input type="file" id="flows">
<pre id="loaded"></pre>
<script>
flows.addEventListener('change', async () => { loaded.textContent = await flows.files[0].text() })
</script>
`

func serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(testPage))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

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

func TestBrowser(t *testing.T) {
	b := launch(t, Options{Width: 640, Height: 480})
	ctx := testContext(t)
	url := serve(t)
	if err := b.Navigate(ctx, url); err != nil {
		t.Fatal(err)
	}

	t.Run("Eval", func(t *testing.T) {
		var title string
		if err := b.Eval(ctx, "document.title", &title); err != nil {
			t.Fatal(err)
		}
		var sum struct{ N int }
		if err := b.Eval(ctx, "Promise.resolve({n: 1 + 2})", &sum); err != nil {
			t.Fatal(err)
		}
		if title != "browser test" || sum.N != 3 {
			t.Errorf("got title %q and n %d, want \"browser test\" and 3", title, sum.N)
		}
	})

	t.Run("EvalError", func(t *testing.T) {
		for _, tc := range []struct{ js, want string }{
			{"(() => { throw new Error('thrown here') })()", "Uncaught Error: thrown here"},
			{"Promise.reject(new TypeError('rejected here'))", "TypeError: rejected here"},
			{"no.such.thing", "ReferenceError: no is not defined"},
			{"undefined", "result undefined is not JSON"},
		} {
			var out any
			err := b.Eval(ctx, tc.js, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Eval(%s): got error %v, want one with %q", tc.js, err, tc.want)
			}
		}
		// The caller has these errors; they are not the page's.
		if errs := b.Errors(); len(errs) > 0 {
			t.Errorf("Errors() after Eval's exceptions: %q, want none", errs)
		}
	})

	t.Run("ClickAndWait", func(t *testing.T) {
		if err := b.Eval(ctx, "inc.click()", nil); err != nil {
			t.Fatal(err)
		}
		if err := b.WaitFor(ctx, "count.textContent === '1'", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		err := b.WaitFor(ctx, "count.textContent === '2'", 50*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "count.textContent === '2'") || !strings.Contains(err.Error(), "value false") {
			t.Errorf("WaitFor of what never happens: got %v, want the expression and its last value", err)
		}
	})

	t.Run("ContextDone", func(t *testing.T) {
		done, cancel := context.WithDeadline(ctx, time.Now())
		defer cancel()
		if err := b.Eval(done, "1", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Eval with its deadline past: got %v, want DeadlineExceeded", err)
		}
		// A call that never started leaves the connection as it was.
		if err := b.Eval(ctx, "1", nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Screenshot", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "page.png")
		if err := b.Screenshot(ctx, path); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg, format, err := image.DecodeConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		if format != "png" || cfg.Width != 640 || cfg.Height != 480 {
			t.Errorf("screenshot is a %dx%d %s, want a 640x480 png", cfg.Width, cfg.Height, format)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		// Both happen before Eval returns, and the protocol keeps its
		// messages in order: Errors has them when Eval is done.
		if err := b.Eval(ctx, "boom.click(); console.error('logged', 42)", nil); err != nil {
			t.Fatal(err)
		}
		errs := b.Errors()
		if len(errs) != 2 ||
			!strings.HasPrefix(errs[0], "exception: Uncaught Error: boom from a click") ||
			errs[1] != "console.error: logged 42" {
			t.Errorf("Errors() = %q, want the click's exception and the console.error", errs)
		}
	})

	t.Run("SetFileInput", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "flows.json")
		if err := os.WriteFile(path, []byte(`{"flow":{}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := b.SetFileInput(ctx, "#flows", path); err != nil {
			t.Fatal(err)
		}
		if err := b.WaitFor(ctx, `loaded.textContent === '{"flow":{}}'`, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := b.SetFileInput(ctx, "#nothing", path); err == nil || !strings.Contains(err.Error(), "no element") {
			t.Errorf("SetFileInput of a missing element: got %v, want no element", err)
		}
	})

	t.Run("Metrics", func(t *testing.T) {
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
	})

	t.Run("NavigateRefused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close() // its port now refuses connections
		err := b.Navigate(ctx, srv.URL)
		if err == nil || !strings.Contains(err.Error(), "ERR_CONNECTION_REFUSED") {
			t.Errorf("Navigate to a closed port: got %v, want ERR_CONNECTION_REFUSED", err)
		}
		// The page is usable again after the failure.
		if err := b.Navigate(ctx, url); err != nil {
			t.Fatal(err)
		}
	})
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
