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
	"slices"
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
<button id="reject" onclick="Promise.reject(new RangeError('nobody catches'))">reject</button>
<input type="file" id="flows">
<pre id="loaded"></pre>
<script>
flows.addEventListener('change', async () => { loaded.textContent = await flows.files[0].text() })
</script>
`

// brokenPage throws while it loads, before any script of a driver's
// could run after the navigation.
const brokenPage = `<!doctype html>
<title>broken</title>
<script>throw new Error('thrown while loading')</script>
`

func serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		page := testPage
		if r.URL.Path == "/broken" {
			page = brokenPage
		}
		w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// launchEngine starts e's browser for the test, or skips it when the
// browser is not installed.
func launchEngine(t *testing.T, e Engine, opts Options) Page {
	t.Helper()
	e.Require(t)
	start := time.Now()
	p, err := e.Launch(testContext(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s launched in %s", e.Name, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// refused is how each engine names a port that refuses connections.
var refused = map[string]string{"chromium": "ERR_CONNECTION_REFUSED", "firefox": "connectionFailure"}

// TestPage checks what Page promises, in every engine.
func TestPage(t *testing.T) {
	for _, e := range Engines() {
		t.Run(e.Name, func(t *testing.T) { testPageIn(t, e) })
	}
}

func testPageIn(t *testing.T, e Engine) {
	p := launchEngine(t, e, Options{Width: 640, Height: 480})
	ctx := testContext(t)
	url := serve(t)
	if err := p.Navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	t.Run("Eval", func(t *testing.T) { testEval(t, ctx, p) })
	t.Run("EvalError", func(t *testing.T) { testEvalError(t, ctx, p) })
	t.Run("ClickAndWait", func(t *testing.T) { testClickAndWait(t, ctx, p) })
	t.Run("ContextDone", func(t *testing.T) {
		done, cancel := context.WithDeadline(ctx, time.Now())
		defer cancel()
		if err := p.Eval(done, "1", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Eval with its deadline past: got %v, want DeadlineExceeded", err)
		}
		// A call that never started leaves the connection as it was.
		if err := p.Eval(ctx, "1", nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Screenshot", func(t *testing.T) { testScreenshot(t, ctx, p) })
	t.Run("Errors", func(t *testing.T) {
		// Both happen before Eval returns: Errors has them when it is done.
		if err := p.Eval(ctx, "(boom.click(), console.error('logged', 42))", nil); err != nil {
			t.Fatal(err)
		}
		errs := p.Errors()
		if len(errs) != 2 || !strings.HasPrefix(errs[0], "exception: ") || !strings.Contains(errs[0], "Error: boom from a click") ||
			errs[1] != "console.error: logged 42" {
			t.Errorf("Errors() = %q, want the click's exception and the console.error", errs)
		}
		// The page's rejection is found unhandled after Eval has returned.
		// (One of Eval's own promises would not do: Firefox runs Eval's
		// script in a sandbox, whose promises are not the page's.)
		if err := p.Eval(ctx, "reject.click()", nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !slices.ContainsFunc(errs, func(s string) bool { return strings.Contains(s, "RangeError: nobody catches") }) {
			if time.Now().After(deadline) {
				t.Fatalf("Errors() = %q, want the unhandled rejection", errs)
			}
			time.Sleep(10 * time.Millisecond)
			errs = p.Errors()
		}
		t.Logf("Errors() = %q", errs)
	})
	t.Run("SetFileInput", func(t *testing.T) { testSetFileInput(t, ctx, p) })
	t.Run("NavigateRefused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close() // its port now refuses connections
		err := p.Navigate(ctx, srv.URL)
		if err == nil || !strings.Contains(err.Error(), refused[e.Name]) {
			t.Errorf("Navigate to a closed port: got %v, want %s", err, refused[e.Name])
		}
		// The page is usable again after the failure.
		if err := p.Navigate(ctx, url); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrorWhileLoading", func(t *testing.T) {
		before := len(p.Errors())
		if err := p.Navigate(ctx, url+"/broken"); err != nil {
			t.Fatal(err)
		}
		errs := p.Errors()[before:]
		if len(errs) != 1 || !strings.HasPrefix(errs[0], "exception: ") || !strings.Contains(errs[0], "Error: thrown while loading") {
			t.Errorf("new Errors() = %q, want the exception thrown while the page loaded, once", errs)
		}
	})
}

func testEval(t *testing.T, ctx context.Context, p Page) {
	var title string
	if err := p.Eval(ctx, "document.title", &title); err != nil {
		t.Fatal(err)
	}
	var sum struct{ N int }
	if err := p.Eval(ctx, "Promise.resolve({n: 1 + 2}) // a comment ends the line", &sum); err != nil {
		t.Fatal(err)
	}
	if title != "browser test" || sum.N != 3 {
		t.Errorf("got title %q and n %d, want \"browser test\" and 3", title, sum.N)
	}
}

func testEvalError(t *testing.T, ctx context.Context, p Page) {
	for _, tc := range []struct{ js, want string }{
		{"(() => { throw new Error('thrown here') })()", "Error: thrown here"},
		{"Promise.reject(new TypeError('rejected here'))", "TypeError: rejected here"},
		{"no.such.thing", "ReferenceError: no is not defined"},
		{"1 +", "SyntaxError"},
		{"undefined", "result undefined is not JSON"},
		{"NaN", "result NaN is not JSON"},
	} {
		var out any
		err := p.Eval(ctx, tc.js, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Eval(%s): got error %v, want one with %q", tc.js, err, tc.want)
		}
	}
	// The caller has these errors; they are not the page's.
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("Errors() after Eval's exceptions: %q, want none", errs)
	}
}

func testClickAndWait(t *testing.T, ctx context.Context, p Page) {
	if err := p.Eval(ctx, "inc.click()", nil); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, "count.textContent === '1'", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// Long enough for a loaded machine to evaluate it at least once.
	err := p.WaitFor(ctx, "count.textContent === '2'", 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "count.textContent === '2'") || !strings.Contains(err.Error(), "value false") {
		t.Errorf("WaitFor of what never happens: got %v, want the expression and its last value", err)
	}
}

func testScreenshot(t *testing.T, ctx context.Context, p Page) {
	path := filepath.Join(t.TempDir(), "page.png")
	if err := p.Screenshot(ctx, path); err != nil {
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
}

func testSetFileInput(t *testing.T, ctx context.Context, p Page) {
	path := filepath.Join(t.TempDir(), "flows.json")
	if err := os.WriteFile(path, []byte(`{"flow":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.SetFileInput(ctx, "#flows", path); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, `loaded.textContent === '{"flow":{}}'`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.SetFileInput(ctx, "#nothing", path); err == nil || !strings.Contains(err.Error(), "no element") {
		t.Errorf("SetFileInput of a missing element: got %v, want no element", err)
	}
}
