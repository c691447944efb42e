// Package testenv is the shared infrastructure of tests that need more than
// a process: root, network namespaces, and conditions that become true
// some time later. Only tests import it.
//
// A test that needs root is named TestPrivileged... (BenchmarkPrivileged...,
// FuzzPrivileged...) and calls Privileged first. Without root it skips,
// except in CI (CI=true), which runs as root: there a privileged test that
// cannot run is a failure, as every other skip that hack/skip-allowlist.txt
// does not allow.
package testenv

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// privilegedPrefixes are the names a privileged test may have: `go test
// -run Privileged` selects them, and `-skip Privileged` leaves them out.
var privilegedPrefixes = []string{"TestPrivileged", "BenchmarkPrivileged", "FuzzPrivileged"}

// Privileged is the gate of every test that needs root; call it first. It
// fails a test whose name does not say it is privileged, skips when not
// root, and fails instead of skipping when CI=true.
func Privileged(t testing.TB) {
	t.Helper()
	gate(t, os.Geteuid(), inCI())
}

func gate(t testing.TB, euid int, ci bool) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	if !hasPrivilegedName(top) {
		t.Fatalf("%s needs root: rename it to start with TestPrivileged (or BenchmarkPrivileged, FuzzPrivileged), the mark of the tests that need root", top)
	}
	if euid == 0 {
		return
	}
	if ci {
		t.Fatalf("%s needs root and CI=true: CI runs as root, so a privileged test that cannot run there did not pass", top)
	}
	t.Skipf("%s needs root: run it as root (CI does)", top)
}

func hasPrivilegedName(name string) bool {
	for _, p := range privilegedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// inCI reads CI as hack/testreport does.
func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}
