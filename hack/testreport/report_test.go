package main

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// testdata/go-test.json is real `go test -json ./...` output of a module
// with a passing package, a package with a failing subtest and two skips,
// one whose test does not build, one whose test panics and one without
// tests, after a line that is not JSON.
func readFixture(t *testing.T, verbose bool) (*report, string) {
	t.Helper()
	f, err := os.Open("testdata/go-test.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	r := newReport(&out, verbose)
	s := bufio.NewScanner(f)
	for s.Scan() {
		r.Line(s.Bytes())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return r, out.String()
}

func TestReportSkips(t *testing.T) {
	r, _ := readFixture(t, false)
	want := []Skip{
		{"example.com/fx/a", "TestSkipRoot", "a_test.go:9: needs root: creates namespaces"},
		{"example.com/fx/a", "TestNetkit/netkit", "a_test.go:15: netkit pod devices: kernel without netkit devices"},
	}
	if !slices.Equal(r.Skips, want) {
		t.Errorf("skips\n%q\nwant\n%q", r.Skips, want)
	}
	if !r.Failed {
		t.Error("the run failed, the report says it did not")
	}
}

// TestReportOutput: the output is plain go test's: failures with their
// messages, build errors, each package's closing line, foreign lines as they
// are; no -v framing and nothing of passing or skipped tests.
func TestReportOutput(t *testing.T) {
	_, out := readFixture(t, false)
	for _, want := range []string{
		"go: downloading example.com/dep v1.0.0\n",
		"    a_test.go:21: wrong answer\n        second line\n--- FAIL: TestFail/sub (0.00s)\n",
		"    a_test.go:20: before\n",
		"--- FAIL: TestFail (0.00s)\n",
		"FAIL\texample.com/fx/a\t0.001s\n",
		"ok  \texample.com/fx/b\t(cached)\n",
		"c/c_test.go:5:33: undefined: undefined\n",
		"FAIL\texample.com/fx/c [build failed]\n",
		"    d_test.go:6: about to panic\n",
		"panic: assignment to entry in nil map",
		"FAIL\texample.com/fx/d\t0.001s\n",
		"?   \texample.com/fx/e\t[no test files]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"=== RUN", "noise", "needs root", "--- PASS", "--- SKIP", "PASS\n"} {
		if strings.Contains(out, not) {
			t.Errorf("output has %q:\n%s", not, out)
		}
	}
}

func TestReportVerbose(t *testing.T) {
	_, out := readFixture(t, true)
	for _, want := range []string{"=== RUN   TestPass\n", "    a_test.go:5: noise\n", "--- SKIP: TestSkipRoot (0.00s)\n",
		"ok  \texample.com/fx/b\t(cached)\n", "FAIL\texample.com/fx/c [build failed]\n"} {
		if strings.Count(out, want) != 1 {
			t.Errorf("verbose output has %q %d times, want once:\n%s", want, strings.Count(out, want), out)
		}
	}
}

func TestSkipReason(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"last message", []string{"=== RUN   TestX\n", "    x_test.go:3: log\n", "    x_test.go:4: why\n", "--- SKIP: TestX (0.00s)\n"}, "x_test.go:4: why"},
		{"continued", []string{"    x_test.go:4: why\n", "        and more\n", "--- SKIP: TestX (0.00s)\n"}, "x_test.go:4: why and more"},
		// A test that re-runs itself in namespaces logs the inner run, which
		// holds its own SKIP line, before skipping.
		{"nested run", []string{"    p_test.go:70: in namespaces:\n", "        --- SKIP: TestY (0.00s)\n",
			"    p_test.go:73: skipped in namespaces\n", "--- SKIP: TestY (0.00s)\n"}, "p_test.go:73: skipped in namespaces"},
		{"silent", []string{"=== RUN   TestX\n", "--- SKIP: TestX (0.00s)\n"}, "(no reason given)"},
	} {
		if got := skipReason(c.lines); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAllowList(t *testing.T) {
	f, err := os.Open("testdata/allowlist.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allow, err := parseAllowList(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(allow) != 2 {
		t.Fatalf("%d patterns, want 2 (comments and blank lines are not patterns)", len(allow))
	}
	r, _ := readFixture(t, false)
	if allow.allows(r.Skips[0]) || !allow.allows(r.Skips[1]) {
		t.Errorf("allowed %v and %v, want only the netkit skip", allow.allows(r.Skips[0]), allow.allows(r.Skips[1]))
	}
	if _, err := parseAllowList(strings.NewReader("# why\n(unclosed\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad pattern: %v, want an error naming line 2", err)
	}
}

// The allow-list the Makefile uses parses, and allows the netkit skip of
// the datapath's tests on a kernel without netkit and nothing else.
func TestRepoAllowList(t *testing.T) {
	f, err := os.Open("../skip-allowlist.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allow, err := parseAllowList(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		reason string
		want   bool
	}{
		{"privileged_test.go:76: netkit pod devices: start datapath on node1: netkit pod devices: probe netkit: kernel without netkit devices: operation not supported", true},
		{"podlink_privileged_test.go:147: this kernel has netkit: nothing refuses to start", true},
		{"privileged_test.go:21: privileged datapath tests need root: they create namespaces, veths and BPF programs", false},
		{"privileged_test.go:91: agnhost not built: run `make build-k8s` or set LAB_AGNHOST", false},
	} {
		if got := allow.allows(Skip{Reason: c.reason}); got != c.want {
			t.Errorf("%q allowed %v, want %v", c.reason, got, c.want)
		}
	}
}
