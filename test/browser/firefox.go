package browser

import (
	"context"
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
	"time"
)

// ErrNoFirefox is returned by LaunchFirefox when no Firefox is found.
var ErrNoFirefox = errors.New("firefox-esr not installed (hack/deps.sh test installs it)")

// Firefox is a running headless Firefox with one page, driven through
// Marionette (Firefox's own remote protocol, over a loopback TCP socket)
// so that it needs no module beyond the standard library. Its methods may
// be called from several goroutines.
//
// Errors sees uncaught exceptions and unhandled rejections from the
// moment the page starts loading, but console.error only from the end of
// Navigate on: Marionette has no way to run a script before the page's
// own, so the page's recorder comes after them. Firefox's console
// service, read from Firefox's own scope, covers exceptions until then.
type Firefox struct {
	cmd    *exec.Cmd
	dir    string // the profile, TMPDIR and HOME, removed by Close
	m      *marionette
	stderr *tailBuffer

	exited  chan struct{} // closed when cmd.Wait has returned
	waitErr error         // cmd.Wait's error; read after exited closes

	// scope is held shared by every command to the page and exclusively
	// while the session is in Firefox's own (chrome) scope to read its
	// console service: Marionette's scope is the session's, not the
	// command's.
	scope sync.RWMutex

	errMu     sync.Mutex // keeps collections in order; guards errors
	errors    []string
	closing   atomic.Bool // Close has begun: an exit is no surprise
	closeOnce sync.Once
	closeErr  error
}

// findFirefox returns Firefox's path: the one given, $FIREFOX, or the
// first of firefox-esr and firefox on $PATH. As for Chromium, a path that
// was asked for but does not exist is an error, not ErrNoFirefox.
func findFirefox(binary string) (string, error) {
	if binary == "" {
		binary = os.Getenv("FIREFOX")
	}
	if binary != "" {
		path, err := exec.LookPath(binary)
		if err != nil {
			return "", fmt.Errorf("firefox: %w", err)
		}
		return path, nil
	}
	for _, name := range []string{"firefox-esr", "firefox"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", ErrNoFirefox
}

// LaunchFirefox starts a headless Firefox with a fresh profile in a
// temporary directory and opens a Marionette session on its blank page.
// opts.Binary is Firefox's path (empty: $FIREFOX, else firefox-esr or
// firefox from $PATH). ctx bounds the start only: Firefox runs until
// Close, which the caller must call.
func LaunchFirefox(ctx context.Context, opts Options) (*Firefox, error) {
	path, err := findFirefox(opts.Binary)
	if err != nil {
		return nil, err
	}
	if opts.Width == 0 || opts.Height == 0 {
		opts.Width, opts.Height = 1280, 800
	}
	dir, err := os.MkdirTemp("", "firefox-")
	if err != nil {
		return nil, fmt.Errorf("launch firefox: %w", err)
	}
	f, err := startFirefox(path, dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("launch firefox: %w", err)
	}
	if err := f.connect(ctx, opts); err != nil {
		f.Close()
		return nil, fmt.Errorf("launch firefox: %w", err)
	}
	return f, nil
}

func startFirefox(path, dir string, opts Options) (*Firefox, error) {
	profile := filepath.Join(dir, "profile")
	if err := writeProfile(profile); err != nil {
		return nil, err
	}
	// Firefox writes outside its profile too: temporary files and its
	// crash helper's socket to TMPDIR, caches to $HOME. All of it goes to
	// dir, which Close removes.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "TMPDIR="+tmp, "HOME="+dir,
		"XDG_CONFIG_HOME="+filepath.Join(dir, ".config"), "XDG_CACHE_HOME="+filepath.Join(dir, ".cache"),
		// No crash reporter (it would outlive a kill), and no offer of
		// safe mode after one: tests send no crash reports.
		"MOZ_CRASHREPORTER_DISABLE=1", "MOZ_DISABLE_AUTO_SAFE_MODE=1",
		// Lets services.settings.server (firefox_profile.go) keep Remote
		// Settings off the network.
		"MOZ_REMOTE_SETTINGS_DEVTOOLS=1")
	args := []string{
		"--headless", "--marionette", "--no-remote", "--profile", profile,
		// Errors reads exceptions from Firefox's console service, which
		// only a script in Firefox's own scope can reach.
		"--remote-allow-system-access",
	}
	f := &Firefox{dir: dir, stderr: &tailBuffer{max: 4 << 10}, exited: make(chan struct{})}
	f.cmd = exec.Command(path, append(args, opts.Args...)...)
	f.cmd.Env = env
	f.cmd.Stdout = f.stderr
	f.cmd.Stderr = f.stderr
	// A group of its own, so that Close kills the content processes with
	// the main one.
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process outside the group could keep stderr open: Wait would then
	// wait for it forever.
	f.cmd.WaitDelay = time.Second
	if err := f.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		f.waitErr = f.cmd.Wait()
		close(f.exited)
	}()
	return f, nil
}

// exitError says why the connection broke: most often Firefox exited, and
// its exit status and last words say more than the socket's EOF.
func (f *Firefox) exitError(readErr error) error {
	select {
	case <-f.exited:
	case <-time.After(2 * time.Second):
		return readErr
	}
	if f.closing.Load() {
		return ErrClosed
	}
	err := errors.New("firefox exited")
	if f.waitErr != nil {
		err = fmt.Errorf("firefox: %w", f.waitErr)
	}
	if out := strings.TrimSpace(f.stderr.String()); out != "" {
		err = fmt.Errorf("%w; its output ends:\n%s", err, out)
	}
	return err
}

// connect waits for Marionette's port, opens a session on the blank
// page, starts recording its exceptions and sizes its viewport.
func (f *Firefox) connect(ctx context.Context, opts Options) error {
	port, err := f.activePort(ctx)
	if err != nil {
		return err
	}
	if f.m, err = dialMarionette(ctx, port, f.exitError); err != nil {
		return err
	}
	caps := map[string]any{
		"pageLoadStrategy": "normal",
		// The caller's context bounds Eval, as with Chromium: Firefox's
		// limit (30s by default) only ends a script whose caller gave
		// up. Not null, "no limit": Marionette then answers every
		// script with null at once.
		"timeouts": map[string]any{"script": time.Hour.Milliseconds()},
		// A file input hidden behind a styled label still takes files.
		"strictFileInteractability": false,
		// An alert must not make every later command fail.
		"unhandledPromptBehavior": "dismiss",
	}
	if err := f.m.call(ctx, "WebDriver:NewSession", caps, nil); err != nil {
		return err
	}
	if err := f.chrome(ctx, recordExceptions, nil); err != nil {
		return fmt.Errorf("record exceptions: %w", err)
	}
	return f.resize(ctx, opts.Width, opts.Height)
}

// activePort waits until Firefox has written Marionette's port into the
// profile, and returns it.
func (f *Firefox) activePort(ctx context.Context) (int, error) {
	file := filepath.Join(f.dir, "profile", activePortFile)
	for {
		// Read again until a number: the file may be seen half written.
		if b, err := os.ReadFile(file); err == nil {
			if port, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && port > 0 {
				return port, nil
			}
		}
		select {
		case <-f.exited:
			return 0, f.exitError(errors.New("no marionette port"))
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for marionette's port: %w", ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// resize makes the viewport width x height: the window's size is set,
// and that includes Firefox's toolbars, even headless.
func (f *Firefox) resize(ctx context.Context, width, height int) error {
	const sizes = `return [innerWidth, innerHeight, outerWidth, outerHeight]`
	var s [4]int
	for range 2 {
		if err := f.call(ctx, "WebDriver:ExecuteScript", map[string]any{"script": sizes, "args": []any{}}, &s); err != nil {
			return fmt.Errorf("resize: %w", err)
		}
		if s[0] == width && s[1] == height {
			return nil
		}
		rect := map[string]any{"width": width + s[2] - s[0], "height": height + s[3] - s[1]}
		if err := f.call(ctx, "WebDriver:SetWindowRect", rect, nil); err != nil {
			return fmt.Errorf("resize: %w", err)
		}
	}
	return fmt.Errorf("resize: viewport %dx%d, want %dx%d", s[0], s[1], width, height)
}

// Close ends Firefox and all its processes (asked to quit, killed if it
// has not within closeTimeout) and removes its directory. It is safe to
// call more than once; later calls return the first's error. The page's
// errors stay readable with Errors.
func (f *Firefox) Close() error {
	f.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if f.m != nil && f.m.failed() == nil {
			f.collectErrors(ctx)
		}
		f.closing.Store(true)
		// Asked first, if it can still hear: Firefox then ends its
		// content processes and reaps them, and a kill would leave their
		// zombies to an init that may never reap them.
		if f.m != nil && f.m.failed() == nil {
			f.m.call(ctx, "Marionette:Quit", map[string]any{"flags": []string{"eForceQuit"}}, nil)
			select {
			case <-f.exited:
			case <-ctx.Done():
			}
		}
		if f.m != nil {
			f.m.close(ErrClosed)
		}
		// Whatever is left of the group, Firefox too if it did not exit;
		// ESRCH: nothing is.
		syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		<-f.exited
		killStragglers(f.dir)
		f.closeErr = os.RemoveAll(f.dir)
	})
	return f.closeErr
}
