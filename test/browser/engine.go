package browser

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Page is one page in a headless browser, whichever engine runs it: what
// a browser test of a web page needs. Chromium's *Browser and *Firefox
// implement it.
type Page interface {
	// Navigate loads url and waits for its load event.
	Navigate(ctx context.Context, url string) error
	// Eval runs the JavaScript expression js, awaits it if it is a
	// promise, and decodes its value into out as JSON (out may be nil).
	// A thrown exception or a rejected promise is an error with its
	// message.
	Eval(ctx context.Context, js string, out any) error
	// WaitFor polls js until it is true, or fails after timeout naming js
	// and its last value.
	WaitFor(ctx context.Context, js string, timeout time.Duration) error
	// Screenshot writes a PNG of the viewport to path.
	Screenshot(ctx context.Context, path string) error
	// SetFileInput selects files for the <input type=file> that the CSS
	// selector matches, as a user would: its change event fires.
	SetFileInput(ctx context.Context, selector string, paths ...string) error
	// Errors returns the page's uncaught exceptions and console.error
	// messages so far, one line each.
	Errors() []string
	// Close ends the browser and removes what it wrote; safe to call twice.
	Close() error
}

var (
	_ Page = (*Browser)(nil)
	_ Page = (*Firefox)(nil)
)

// Engine is a browser the page tests run in.
type Engine struct {
	Name string
	// Launch starts the browser with a fresh profile and one blank page.
	Launch func(ctx context.Context, opts Options) (Page, error)
	// missing returns the engine's "not installed" error, or nil.
	missing func() error
}

// Engines are the browsers that the Hubble UI must work in: Chromium and
// Firefox.
func Engines() []Engine {
	return []Engine{
		{
			Name: "chromium",
			Launch: func(ctx context.Context, opts Options) (Page, error) {
				b, err := Launch(ctx, opts)
				if err != nil {
					return nil, err // not a non-nil Page holding a nil *Browser
				}
				return b, nil
			},
			missing: func() error { _, err := findBinary(""); return onlyMissing(err, ErrNoBrowser) },
		},
		{
			Name: "firefox",
			Launch: func(ctx context.Context, opts Options) (Page, error) {
				f, err := LaunchFirefox(ctx, opts)
				if err != nil {
					return nil, err
				}
				return f, nil
			},
			missing: func() error { _, err := findFirefox(""); return onlyMissing(err, ErrNoFirefox) },
		},
	}
}

// onlyMissing keeps a lookup's error only if it is notInstalled: a
// missing browser skips, a wrong $CHROMIUM or $FIREFOX fails in Launch,
// where the mistake shows.
func onlyMissing(err, notInstalled error) error {
	if errors.Is(err, notInstalled) {
		return err
	}
	return nil
}

// Require skips the test when the engine's browser is not installed.
func (e Engine) Require(t testing.TB) {
	t.Helper()
	if err := e.missing(); err != nil {
		t.Skip(err)
	}
}

// waitFor evaluates js with try until it is true, and returns an error
// naming js and its last value or evaluation error if that has not
// happened within timeout (or before ctx ends). An evaluation error is
// just a false (the page may be between documents, or not have built the
// element yet) unless broken says the browser is gone. Both engines'
// WaitFor poll this way.
func waitFor(ctx context.Context, js string, timeout time.Duration,
	try func(context.Context) (ok bool, value string, err error), broken func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Quick first polls for what is nearly ready; slower ones after, so
	// that polling does not load the page it measures.
	interval := 5 * time.Millisecond
	last := "not evaluated"
	for {
		ok, value, err := try(ctx)
		switch {
		case err == nil && ok:
			return nil
		case err == nil:
			last = "value " + value
		case broken() != nil:
			return err
		case ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded):
			// An evaluation cut short by the deadline says only that (the
			// socket's deadline may pass before ctx's): the value before
			// it says more.
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: not true after %s (last: %s)", short(js), timeout, last)
		case <-time.After(interval):
		}
		interval = min(2*interval, 100*time.Millisecond)
	}
}
