// Package browser drives a headless Chromium or Firefox for the Hubble
// UI's browser tests and benchmark: load a page, run JavaScript in it,
// wait for the DOM, take screenshots, and collect the page's errors; in
// Chromium also read the JS heap. Page is what both engines do; Engines
// lists them for tests that run in each.
//
// Chromium is driven with the DevTools protocol over
// --remote-debugging-pipe (JSON messages on two file descriptors) rather
// than over a WebSocket, Firefox with Marionette over a loopback socket
// (firefox.go), so that neither needs a module beyond the standard
// library. One Browser or Firefox has one page.
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ErrNoBrowser is returned by Launch when no Chromium binary is found.
var ErrNoBrowser = errors.New("chromium not installed (hack/deps.sh test installs it)")

// closeTimeout bounds how long Close waits for Chromium to exit when
// asked, before it kills it.
const closeTimeout = 5 * time.Second

// ErrClosed is returned by calls on a Browser or Firefox after Close.
var ErrClosed = errors.New("browser closed")

// Options says how to start a browser. The zero value is usable.
type Options struct {
	// Binary is the browser's path. Empty: for Chromium $CHROMIUM, else
	// chromium or chromium-browser from $PATH; for Firefox $FIREFOX, else
	// firefox-esr or firefox.
	Binary string
	// Width and Height are the page's viewport in CSS pixels, and so the
	// size of screenshots (the device scale factor is 1). Zero: 1280x800.
	Width, Height int
	// Args are more command-line flags for the browser.
	Args []string
}

// Browser is a running Chromium with one page attached. Its methods may be
// called from several goroutines.
type Browser struct {
	cmd     *exec.Cmd
	dir     string // the profile and Chromium's TMPDIR, removed by Close
	conn    *conn
	session string // the page's flattened session
	stderr  *tailBuffer

	exited  chan struct{} // closed when cmd.Wait has returned
	waitErr error         // cmd.Wait's error; read after exited closes

	mu     sync.Mutex
	errors []string

	closing   atomic.Bool // Close has begun: an exit is no surprise
	closeOnce sync.Once
	closeErr  error
}

// Require skips the test when Launch would return ErrNoBrowser.
func Require(t testing.TB) {
	t.Helper()
	if _, err := findBinary(""); errors.Is(err, ErrNoBrowser) {
		t.Skip(err)
	}
}

// findBinary returns Chromium's path: the one given, $CHROMIUM, or the
// first of its Debian and Ubuntu names on $PATH. A path that was asked for
// but does not exist is an error, not ErrNoBrowser: the caller wanted that
// one, and skipping would hide the mistake.
func findBinary(binary string) (string, error) {
	if binary == "" {
		binary = os.Getenv("CHROMIUM")
	}
	if binary != "" {
		path, err := exec.LookPath(binary)
		if err != nil {
			return "", fmt.Errorf("chromium: %w", err)
		}
		return path, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", ErrNoBrowser
}

// Launch starts a headless Chromium with a fresh profile in a temporary
// directory and attaches to a new page. ctx bounds the start only: the
// browser runs until Close, which the caller must call.
func Launch(ctx context.Context, opts Options) (*Browser, error) {
	path, err := findBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	if opts.Width == 0 || opts.Height == 0 {
		opts.Width, opts.Height = 1280, 800
	}
	dir, err := os.MkdirTemp("", "chromium-")
	if err != nil {
		return nil, fmt.Errorf("launch chromium: %w", err)
	}
	b, err := start(path, dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("launch chromium: %w", err)
	}
	if err := b.attach(ctx, opts); err != nil {
		b.Close()
		return nil, fmt.Errorf("launch chromium: %w", err)
	}
	return b, nil
}

// flags are Chromium's command line: headless, with dir as its profile
// and the DevTools protocol on fds 3 and 4.
func flags(dir string, opts Options) []string {
	args := []string{
		"--headless",
		// Tests run as root, where Chromium's sandbox refuses to start.
		"--no-sandbox",
		"--disable-gpu",
		"--no-first-run",
		"--no-default-browser-check",
		// The page's requests are the only ones a test should see or wait
		// for: no updates, no Safe Browsing lists, no field trials.
		"--disable-background-networking",
		"--disable-component-update",
		// The crash handler starts a session of its own, out of the reach
		// of Close's kill; tests send no crash reports.
		"--user-data-dir=" + filepath.Join(dir, "profile"),
		"--window-size=" + strconv.Itoa(opts.Width) + "," + strconv.Itoa(opts.Height),
		"--remote-debugging-pipe",
	}
	args = append(args, opts.Args...)
	return append(args, "about:blank")
}

func start(path, dir string, opts Options) (*Browser, error) {
	// Chromium writes outside its profile too: its singleton socket to
	// TMPDIR (removed only on a clean exit), crash reports and GTK's
	// caches to $HOME. All of it goes to dir, which Close removes.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "TMPDIR="+tmp, "HOME="+dir,
		"XDG_CONFIG_HOME="+filepath.Join(dir, ".config"), "XDG_CACHE_HOME="+filepath.Join(dir, ".cache"))

	// toChromium: Chromium reads commands from fd 3; fromChromium: it
	// writes replies and events to fd 4 (ExtraFiles start at fd 3).
	cmdIn, toChromium, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	fromChromium, cmdOut, err := os.Pipe()
	if err != nil {
		cmdIn.Close()
		toChromium.Close()
		return nil, err
	}
	b := &Browser{dir: dir, stderr: &tailBuffer{max: 4 << 10}, exited: make(chan struct{})}
	b.cmd = exec.Command(path, flags(dir, opts)...)
	b.cmd.Env = env
	b.cmd.ExtraFiles = []*os.File{cmdIn, cmdOut}
	b.cmd.Stdout = b.stderr
	b.cmd.Stderr = b.stderr
	// A group of its own, so that Close kills the renderers and helpers
	// with the browser process.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A helper outside the group could keep stderr open: Wait would then
	// wait for it forever.
	b.cmd.WaitDelay = time.Second
	err = b.cmd.Start()
	// Chromium has its own copies now; ours would keep the pipes open
	// after it exits, and the reader would never see the end.
	cmdIn.Close()
	cmdOut.Close()
	if err != nil {
		toChromium.Close()
		fromChromium.Close()
		return nil, err
	}
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()
	b.conn = newConn(toChromium, fromChromium, b.exitError)
	return b, nil
}

// exitError says why the pipe broke: most often Chromium exited, and its
// exit status and last words say more than the pipe's EOF.
func (b *Browser) exitError(readErr error) error {
	select {
	case <-b.exited:
	case <-time.After(2 * time.Second):
		return readErr
	}
	if b.closing.Load() {
		return ErrClosed
	}
	err := errors.New("chromium exited")
	if b.waitErr != nil {
		err = fmt.Errorf("chromium: %w", b.waitErr)
	}
	if out := strings.TrimSpace(b.stderr.String()); out != "" {
		err = fmt.Errorf("%w; its output ends:\n%s", err, out)
	}
	return err
}

// attach opens the page the Browser drives and turns on the events its
// methods wait for.
func (b *Browser) attach(ctx context.Context, opts Options) error {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.conn.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return err
	}
	var session struct {
		SessionID string `json:"sessionId"`
	}
	// Flattened: the page's messages travel on the same pipe, tagged with
	// its session id, instead of wrapped in Target.sendMessageToTarget.
	params := map[string]any{"targetId": target.TargetID, "flatten": true}
	if err := b.conn.call(ctx, "", "Target.attachToTarget", params, &session); err != nil {
		return err
	}
	b.session = session.SessionID

	// Registered before Runtime.enable, which reports what the page
	// already logged.
	b.conn.on("Runtime.exceptionThrown", b.onException)
	b.conn.on("Runtime.consoleAPICalled", b.onConsole)
	for _, c := range []struct {
		method string
		params any
	}{
		{"Page.enable", nil},
		{"Page.setLifecycleEventsEnabled", map[string]any{"enabled": true}},
		{"Runtime.enable", nil},
		{"Performance.enable", nil},
		// The window's size is not quite the viewport's in every headless
		// mode; this makes screenshots exactly Width x Height.
		{"Emulation.setDeviceMetricsOverride", map[string]any{
			"width": opts.Width, "height": opts.Height, "deviceScaleFactor": 1, "mobile": false,
		}},
	} {
		if err := b.Call(ctx, c.method, c.params, nil); err != nil {
			return err
		}
	}
	return nil
}

// Call sends a DevTools protocol command to the page and decodes its
// result into result, if not nil: for what the other methods do not cover.
func (b *Browser) Call(ctx context.Context, method string, params, result any) error {
	return b.conn.call(ctx, b.session, method, params, result)
}

// Close ends Chromium and all its processes (asked to exit, killed if it
// does not within closeTimeout) and removes its directory. It is safe to
// call more than once; later calls return the first's error.
func (b *Browser) Close() error {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		// Asked first, if it can still hear: Chromium then ends its
		// helpers and reaps them. A kill leaves their zombies to init,
		// and a container's init may never reap them.
		if b.conn.failed() == nil {
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			b.conn.call(ctx, "", "Browser.close", nil, nil)
			select {
			case <-b.exited:
			case <-ctx.Done():
			}
			cancel()
		}
		b.conn.fail(ErrClosed)
		// Whatever is left of the group, Chromium too if it did not
		// exit; ESRCH: nothing is.
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
		killStragglers(b.dir)
		b.conn.close(ErrClosed)
		b.closeErr = os.RemoveAll(b.dir)
	})
	return b.closeErr
}

// Errors returns the page's uncaught exceptions and console.error
// messages seen so far, oldest first, one line each.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

func (b *Browser) addError(s string) {
	b.mu.Lock()
	b.errors = append(b.errors, s)
	b.mu.Unlock()
}

func (b *Browser) onException(sessionID string, params json.RawMessage) {
	var p struct {
		Details exceptionDetails `json:"exceptionDetails"`
	}
	if sessionID != b.session || json.Unmarshal(params, &p) != nil {
		return
	}
	d := p.Details
	b.addError(fmt.Sprintf("exception: %s (%s:%d:%d)", d.message(), d.URL, d.LineNumber+1, d.ColumnNumber+1))
}

func (b *Browser) onConsole(sessionID string, params json.RawMessage) {
	var p struct {
		Type string         `json:"type"`
		Args []remoteObject `json:"args"`
	}
	if sessionID != b.session || json.Unmarshal(params, &p) != nil || p.Type != "error" {
		return
	}
	s := "console.error:"
	for _, a := range p.Args {
		s += " " + a.String()
	}
	b.addError(s)
}

// tailBuffer keeps the last max bytes written to it: Chromium's stderr,
// whose end tells why it exited.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
