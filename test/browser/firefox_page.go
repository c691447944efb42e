package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// evalScript runs an expression (the %s) for Eval and answers with JSON
// text, so that Marionette's own serialization (elements as references,
// undefined as null) does not change the value: {json}, {notJSON: what
// it was}, {err: the exception as text}, or {} when the caller does not
// want the value. The expression sits on lines of its own, so that a
// trailing // comment in it does not swallow the wrapper's parenthesis.
const evalScript = `const done = arguments[arguments.length - 1];
const want = arguments[0];
Promise.resolve()
  .then(() => (
%s
  ))
  .then((v) => {
    if (!want) return {};
    const json = typeof v === 'number' && !Number.isFinite(v) ? undefined : JSON.stringify(v);
    return json === undefined ? {notJSON: String(v)} : {json};
  })
  .then(done, (e) => done({err: String(e)}));`

// recordPage starts recording the page's errors after each navigation,
// in the page, where their order is certain: uncaught exceptions and
// unhandled rejections as their events reach the window, and calls of
// console.error. It answers after a turn of the event loop, so that what
// the page's process reported before it has reached Firefox's console
// service (recordExceptions) when Navigate reads that.
const recordPage = `const done = arguments[arguments.length - 1];
const key = '__browserTestErrors';
if (!window[key]) {
  const seen = window[key] = [];
  window.addEventListener('error', (e) => {
    seen.push('exception: ' + e.message + ' (' + e.filename + ':' + e.lineno + ':' + e.colno + ')');
  });
  window.addEventListener('unhandledrejection', (e) => {
    seen.push('exception: Uncaught (in promise) ' + String(e.reason));
  });
  const original = console.error;
  console.error = function (...args) {
    seen.push(['console.error:', ...args.map((a) => String(a))].join(' '));
    return original.apply(this, args);
  };
}
setTimeout(done, 0);`

// takePage answers with what recordPage recorded since the last call,
// after a turn of the event loop: an unhandled rejection's event comes in
// a task after the one that left the promise rejected.
const takePage = `const done = arguments[arguments.length - 1];
setTimeout(() => done((window.__browserTestErrors || []).splice(0)), 0);`

// recordExceptions runs once, in Firefox's own scope: the console service
// there hears of every uncaught exception and unhandled rejection in the
// page's process, including those thrown while the page loads, before
// recordPage could run. Warnings, CSS errors and Firefox's own scripts'
// errors are not the page's.
const recordExceptions = `const key = '__browserTestExceptions';
if (!window[key]) {
  const seen = window[key] = [];
  const quiet = Ci.nsIScriptError.warningFlag | Ci.nsIScriptError.infoFlag;
  Services.console.registerListener({observe(m) {
    if (!(m instanceof Ci.nsIScriptError) || m.category !== 'content javascript' || (m.flags & quiet)) return;
    seen.push('exception: ' + m.errorMessage + ' (' + m.sourceName + ':' + m.lineNumber + ':' + m.columnNumber + ')');
  }});
}`

const takeExceptions = `return (window.__browserTestExceptions || []).splice(0)`

// webElement is the key under which WebDriver returns an element's id.
const webElement = "element-6066-11e4-a52e-4f735466cecf"

// value sends a command and decodes the "value" of its result, which is
// where Marionette puts what most commands return, into result if not
// nil. It takes no lock: call and chrome do.
func (f *Firefox) value(ctx context.Context, name string, params, result any) error {
	if result == nil {
		return f.m.call(ctx, name, params, nil)
	}
	var r struct {
		Value json.RawMessage `json:"value"`
	}
	if err := f.m.call(ctx, name, params, &r); err != nil {
		return err
	}
	if err := json.Unmarshal(r.Value, result); err != nil {
		return fmt.Errorf("%s: decode value: %w", name, err)
	}
	return nil
}

// call sends a command about the page.
func (f *Firefox) call(ctx context.Context, name string, params, result any) error {
	f.scope.RLock()
	defer f.scope.RUnlock()
	return f.value(ctx, name, params, result)
}

// chrome runs script in Firefox's own scope, then returns the session to
// the page's.
func (f *Firefox) chrome(ctx context.Context, script string, result any) error {
	f.scope.Lock()
	defer f.scope.Unlock()
	if err := f.m.call(ctx, "Marionette:SetContext", map[string]any{"value": "chrome"}, nil); err != nil {
		return err
	}
	defer func() {
		// Even when ctx has ended: every later command depends on it.
		back, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		if err := f.m.call(back, "Marionette:SetContext", map[string]any{"value": "content"}, nil); err != nil {
			// A page command in Firefox's own scope would run with its
			// privileges: no command may follow.
			f.m.fail(fmt.Errorf("return to the page's scope: %w", err))
		}
	}()
	return f.value(ctx, "WebDriver:ExecuteScript", map[string]any{"script": script, "args": []any{}}, result)
}

// Navigate loads url in the page and waits for its load event. The
// exceptions that Firefox reported until the page's own recorder was in
// place, the page's loading among them, come first in Errors.
func (f *Firefox) Navigate(ctx context.Context, url string) error {
	// The console service's record until now is dropped: the old page's
	// recorder saw the same, and what it saw is kept before the page goes.
	// An error here is one the navigation reports too.
	if f.chrome(ctx, takeExceptions, nil) == nil {
		f.collectErrors(ctx)
	}
	if err := f.call(ctx, "WebDriver:Navigate", map[string]any{"url": url}, nil); err != nil {
		return fmt.Errorf("navigate to %s: %w", url, errorPage(err))
	}
	if err := f.call(ctx, "WebDriver:ExecuteAsyncScript", map[string]any{"script": recordPage, "args": []any{}}, nil); err != nil {
		return fmt.Errorf("navigate to %s: record errors: %w", url, err)
	}
	// An exception thrown between the two lines is in both records: said
	// twice rather than not at all.
	var early []string
	if err := f.chrome(ctx, takeExceptions, &early); err != nil {
		return fmt.Errorf("navigate to %s: read errors: %w", url, err)
	}
	f.errMu.Lock()
	f.errors = append(f.errors, early...)
	f.errMu.Unlock()
	return nil
}

// errorPage shortens Firefox's "Reached error page:
// about:neterror?e=connectionFailure&u=...&d=<a paragraph>" to the
// error's code, as Chromium's ERR_CONNECTION_REFUSED.
func errorPage(err error) error {
	var me *MarionetteError
	if !errors.As(err, &me) {
		return err
	}
	_, page, ok := strings.Cut(me.Message, "Reached error page: ")
	if !ok {
		return err
	}
	u, perr := neturl.Parse(page)
	if perr != nil || u.Query().Get("e") == "" {
		return err
	}
	return fmt.Errorf("%s (Firefox's about:%s)", u.Query().Get("e"), u.Opaque)
}

// evaluate runs the expression js in the page, awaits it, and returns its
// value as JSON text if want is true.
func (f *Firefox) evaluate(ctx context.Context, js string, want bool) (json.RawMessage, error) {
	var r struct {
		JSON    *string `json:"json"`
		NotJSON *string `json:"notJSON"`
		Err     *string `json:"err"`
	}
	params := map[string]any{"script": fmt.Sprintf(evalScript, js), "args": []any{want}}
	if err := f.call(ctx, "WebDriver:ExecuteAsyncScript", params, &r); err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", short(js), err)
	}
	switch {
	case r.Err != nil:
		return nil, fmt.Errorf("evaluate %s: %s", short(js), *r.Err)
	case r.NotJSON != nil:
		return nil, fmt.Errorf("evaluate %s: result %s is not JSON", short(js), *r.NotJSON)
	case r.JSON != nil:
		return json.RawMessage(*r.JSON), nil
	}
	return nil, nil
}

// Eval runs the JavaScript expression js in the page, waits for it if it
// is a promise, and decodes its value into out as JSON (out may be nil).
// A thrown exception or a rejected promise is an error with its message;
// so is a value JSON cannot hold (undefined, NaN) when out is not nil.
// Unlike Chromium's, js must be an expression, not statements, and it runs
// in Marionette's sandbox over the page's window: it reaches the page's
// globals and DOM, but the objects it makes itself (its promises, arrays)
// are the sandbox's, so its own unhandled rejection is not the page's.
func (f *Firefox) Eval(ctx context.Context, js string, out any) error {
	v, err := f.evaluate(ctx, js, out != nil)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("evaluate %s: %w", short(js), err)
	}
	return nil
}

// WaitFor polls the JavaScript expression js until it is true, as
// Chromium's does.
func (f *Firefox) WaitFor(ctx context.Context, js string, timeout time.Duration) error {
	return waitFor(ctx, js, timeout, func(ctx context.Context) (bool, string, error) {
		v, err := f.evaluate(ctx, js, true)
		return err == nil && string(v) == "true", string(v), err
	}, f.m.failed)
}

// Screenshot writes a PNG of the page's viewport to path.
func (f *Firefox) Screenshot(ctx context.Context, path string) error {
	var data string
	// full: false is the viewport; Marionette's default is the document.
	if err := f.call(ctx, "WebDriver:TakeScreenshot", map[string]any{"full": false, "hash": false}, &data); err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	png, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return nil
}

// SetFileInput selects files for the <input type=file> that the CSS
// selector matches, as a user choosing them would: the input's change
// event fires. Relative paths are made absolute.
func (f *Firefox) SetFileInput(ctx context.Context, selector string, paths ...string) error {
	abs := make([]string, len(paths))
	for i, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("set file input %s: %w", selector, err)
		}
		abs[i] = a
	}
	var el map[string]string
	err := f.call(ctx, "WebDriver:FindElement", map[string]any{"using": "css selector", "value": selector}, &el)
	var me *MarionetteError
	if errors.As(err, &me) && me.Code == "no such element" {
		return fmt.Errorf("set file input %s: no element matches", selector)
	}
	if err != nil {
		return fmt.Errorf("set file input %s: %w", selector, err)
	}
	// Typing into a file input selects files: one path a line.
	params := map[string]any{"id": el[webElement], "text": strings.Join(abs, "\n")}
	if err := f.call(ctx, "WebDriver:ElementSendKeys", params, nil); err != nil {
		return fmt.Errorf("set file input %s: %w", selector, err)
	}
	return nil
}

// Errors returns the page's uncaught exceptions and console.error
// messages seen so far, oldest first, one line each. Unlike Chromium's,
// it asks Firefox (for up to closeTimeout); after Close, or when Firefox
// does not answer, it returns what it had. console.error calls made while
// the page loaded are not seen: no script of ours runs before the page's.
func (f *Firefox) Errors() []string {
	if f.m.failed() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		f.collectErrors(ctx)
		cancel()
	}
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return slices.Clone(f.errors)
}

// collectErrors moves what the page recorded since the last call into
// f.errors.
func (f *Firefox) collectErrors(ctx context.Context) error {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	var seen []string
	err := f.call(ctx, "WebDriver:ExecuteAsyncScript", map[string]any{"script": takePage, "args": []any{}}, &seen)
	f.errors = append(f.errors, seen...)
	return err
}
