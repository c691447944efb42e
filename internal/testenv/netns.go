package testenv

import (
	"path/filepath"
	"testing"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// NewNetNS creates a network namespace for the test, with lo up, and
// returns its path: a bind mount on a file in the test's temporary
// directory, so that nothing of it shows in /run/netns. The namespace is
// removed when the test ends. It calls Privileged.
func NewNetNS(t testing.TB) string {
	t.Helper()
	Privileged(t)
	// TempDir's own cleanup, which removes the directory, was registered
	// first and so runs after the removal below.
	path := filepath.Join(t.TempDir(), "netns")
	remove, err := netnamespace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := remove(); err != nil {
			t.Error(err)
		}
	})
	return path
}

// InNetNS runs fn on an OS thread in the network namespace at path (see
// netnamespace.Do) and fails the test with fn's error. fn runs on a goroutine of
// its own, so it must not call t.Fatal: it returns its error instead.
func InNetNS(t testing.TB, path string, fn func() error) {
	t.Helper()
	if err := netnamespace.Do(path, fn); err != nil {
		t.Fatalf("in netns %s: %v", path, err)
	}
}
