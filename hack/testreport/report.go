package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), build events included.
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Output     string
}

// Skip is a skipped test and the reason it gave.
type Skip struct {
	Package string
	Test    string
	Reason  string
}

func (s Skip) String() string { return s.Package + " " + s.Test + ": " + s.Reason }

type testKey struct{ pkg, test string }

// report reads `go test -json` and writes what plain `go test` would have
// written (the output of failing tests, build errors and each package's
// closing line), or everything with verbose. Lines that are not test2json
// events pass through as they are.
type report struct {
	out     io.Writer
	verbose bool

	tests  map[testKey][]string // output of tests still running
	pkgOut map[string][]string  // output outside any test, per package
	Skips  []Skip
	Failed bool // a test, package or build failed
}

func newReport(out io.Writer, verbose bool) *report {
	return &report{out: out, verbose: verbose, tests: map[testKey][]string{}, pkgOut: map[string][]string{}}
}

// Line takes one line of input, without its newline.
func (r *report) Line(line []byte) {
	var e event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
		fmt.Fprintf(r.out, "%s\n", line)
		return
	}
	r.event(e)
}

func (r *report) event(e event) {
	switch e.Action {
	case "build-output":
		io.WriteString(r.out, e.Output)
		return
	case "build-fail":
		r.Failed = true
		return
	}
	if r.verbose && e.Action == "output" {
		io.WriteString(r.out, e.Output)
	}
	if e.Test == "" {
		r.packageEvent(e)
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		r.tests[k] = append(r.tests[k], e.Output)
	case "fail":
		r.Failed = true
		if !r.verbose {
			r.print(r.tests[k])
		}
		delete(r.tests, k)
	case "skip":
		r.Skips = append(r.Skips, Skip{e.Package, e.Test, skipReason(r.tests[k])})
		delete(r.tests, k)
	case "pass":
		delete(r.tests, k)
	}
}

// packageEvent: a passing package shows its closing `ok` line, a failing one
// everything printed outside its tests and the output of the tests that
// never finished (a panic or a timeout stops them all).
func (r *report) packageEvent(e event) {
	lines := r.pkgOut[e.Package]
	switch e.Action {
	case "output":
		r.pkgOut[e.Package] = append(lines, e.Output)
		return
	case "pass", "skip":
		if !r.verbose && len(lines) > 0 {
			io.WriteString(r.out, lines[len(lines)-1])
		}
	case "fail":
		r.Failed = true
		if r.verbose {
			break
		}
		for k, out := range r.tests {
			if k.pkg == e.Package {
				r.print(out)
			}
		}
		r.print(lines)
	default:
		return
	}
	for k := range r.tests {
		if k.pkg == e.Package {
			delete(r.tests, k)
		}
	}
	delete(r.pkgOut, e.Package)
}

// print writes a test's output without the framing lines of -v.
func (r *report) print(lines []string) {
	for _, l := range lines {
		if !framing(l) {
			io.WriteString(r.out, l)
		}
	}
}

func framing(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// logLine is the start of a t.Log or t.Skip message: `    file.go:12: text`.
var logLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// skipReason is the test's last message before its `--- SKIP` line: t.Skip
// writes it last, with its continuation lines.
func skipReason(lines []string) string {
	end := len(lines)
	for end > 0 && (framing(lines[end-1]) || strings.Contains(lines[end-1], "--- SKIP: ")) {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if logLine.MatchString(lines[i]) {
			var parts []string
			for _, l := range lines[i:end] {
				if l = strings.TrimSpace(l); l != "" {
					parts = append(parts, l)
				}
			}
			return strings.Join(parts, " ")
		}
	}
	return "(no reason given)"
}
