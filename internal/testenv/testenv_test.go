package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fakeTB records how a test ended. Fatal and Skip end the goroutine as
// the real ones do, so run calls the function under test on its own.
type fakeTB struct {
	testing.TB // nil: a method the fake lacks panics
	name       string
	failed     bool
	skipped    bool
	msg        string
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return f.name }

func (f *fakeTB) Fatal(args ...any) {
	f.failed, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func run(f *fakeTB, fn func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
}

func TestGate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		euid  int
		ci    bool
		want  string // "pass", "skip" or "fail"
		msgIs string // a part of the message
	}{
		{"TestPrivilegedLinks", 0, true, "pass", ""},
		{"TestPrivilegedLinks/veth", 0, false, "pass", ""},
		{"BenchmarkPrivilegedAttach", 0, false, "pass", ""},
		{"FuzzPrivilegedPolicy/seed#0", 0, false, "pass", ""},
		{"TestPrivilegedLinks", 1000, false, "skip", "TestPrivilegedLinks needs root"},
		{"TestPrivilegedLinks/veth", 1000, true, "fail", "TestPrivilegedLinks needs root and CI=true"},
		{"TestLinks", 0, false, "fail", "rename it to start with TestPrivileged"},
		{"TestLinks/TestPrivilegedVeth", 0, false, "fail", "TestLinks needs root: rename it"},
		// The name is checked first, so that it is wrong everywhere, not
		// only as root.
		{"TestLinks", 1000, false, "fail", "rename it"},
	} {
		t.Run(fmt.Sprintf("%s,euid=%d,ci=%v", tc.name, tc.euid, tc.ci), func(t *testing.T) {
			f := &fakeTB{name: tc.name}
			run(f, func(tb testing.TB) { gate(tb, tc.euid, tc.ci) })
			got := "pass"
			switch {
			case f.failed:
				got = "fail"
			case f.skipped:
				got = "skip"
			}
			if got != tc.want || !strings.Contains(f.msg, tc.msgIs) {
				t.Fatalf("%s: %q, want %s: %q", got, f.msg, tc.want, tc.msgIs)
			}
		})
	}
}

func TestReadsCI(t *testing.T) {
	for _, tc := range []struct {
		ci   string
		want bool
	}{{"true", true}, {"1", true}, {"", false}, {"false", false}, {"yes", false}} {
		t.Setenv("CI", tc.ci)
		if got := inCI(); got != tc.want {
			t.Errorf("CI=%q: in CI %v, want %v", tc.ci, got, tc.want)
		}
	}
}

func TestEventuallyReturnsWhenTrue(t *testing.T) {
	calls := 0
	Eventually(t, 10*time.Second, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("%d calls, want 3", calls)
	}
}

func TestEventuallyReportsTheLastError(t *testing.T) {
	errLast := errors.New("the last")
	calls := 0
	cond := func() error {
		calls++
		if calls >= 3 {
			return errLast
		}
		return fmt.Errorf("early %d", calls)
	}
	f := &fakeTB{name: t.Name()}
	start := time.Now()
	run(f, func(tb testing.TB) { Eventually(tb, 100*time.Millisecond, cond) })
	if !f.failed || !strings.Contains(f.msg, "not true after 100ms: the last") {
		t.Fatalf("failed %v: %q", f.failed, f.msg)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %s, timeout 100ms", d)
	}
	calls = 0
	if err := poll(50*time.Millisecond, cond); !errors.Is(err, errLast) {
		t.Fatalf("poll: %v, want it to wrap %v", err, errLast)
	}
}

func TestEventuallyTriesOnceWithoutTime(t *testing.T) {
	calls := 0
	err := poll(0, func() error { calls++; return errors.New("no") })
	if err == nil || calls != 1 {
		t.Fatalf("%d calls, %v", calls, err)
	}
	if err := poll(0, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestPrivilegedNewNetNS(t *testing.T) {
	Privileged(t)
	var a, b string
	t.Run("create", func(t *testing.T) {
		a, b = NewNetNS(t), NewNetNS(t)
		// The test's own thread: /proc/self is the main thread's.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		own, ia, ib := nsInode(t, "/proc/thread-self/ns/net"), nsInode(t, a), nsInode(t, b)
		if ia == own || ib == own || ia == ib {
			t.Fatalf("namespace inodes: own %d, a %d, b %d", own, ia, ib)
		}
		if m := nsInode(t, "/proc/self/ns/net"); m == ia || m == ib {
			t.Errorf("the main thread stayed in a new namespace (%d)", m)
		}
		InNetNS(t, a, func() error {
			var st unix.Stat_t
			if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
				return err
			}
			if st.Ino != ia {
				return fmt.Errorf("in namespace %d, want %d", st.Ino, ia)
			}
			lo, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			if lo.Attrs().Flags&net.FlagUp == 0 {
				return errors.New("lo is down")
			}
			return nil
		})
	})
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the test: %v", p, err)
		}
	}
}

func TestPrivilegedInNetNSFails(t *testing.T) {
	ns := NewNetNS(t)
	f := &fakeTB{name: t.Name()}
	run(f, func(tb testing.TB) { InNetNS(tb, ns, func() error { return errors.New("broken") }) })
	if !f.failed || !strings.Contains(f.msg, "broken") {
		t.Fatalf("failed %v: %q", f.failed, f.msg)
	}
}

func nsInode(t testing.TB, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
