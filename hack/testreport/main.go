// Command testreport reads `go test -json` on stdin and writes what plain
// `go test` would (failing tests' output, build errors, every package's
// closing ok/FAIL line), then the tests that skipped, with their reasons.
// With CI=true in the environment a skip fails the run unless its reason
// matches a pattern of the allow-list file: in CI a test that cannot run is
// a test that did not pass.
//
//	go test -json ./... | go run ./hack/testreport -allow hack/skip-allowlist.txt
//
// -record appends the skips to a file (JSON lines); -summary prints the
// skips of such files, so that `make test` can list them all at its end.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

func main() {
	allowPath := flag.String("allow", "hack/skip-allowlist.txt", "allow-list of skip reasons (regexps) for CI")
	verbose := flag.Bool("v", false, "write all test output, as go test -v")
	record := flag.String("record", "", "append the skips to this file (JSON lines)")
	summary := flag.Bool("summary", false, "print the skips recorded in the files given as arguments, read no test output")
	flag.Parse()
	if err := run(*allowPath, *verbose, *record, *summary, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

func run(allowPath string, verbose bool, record string, summary bool, files []string) error {
	f, err := os.Open(allowPath)
	if err != nil {
		return err
	}
	allow, err := parseAllowList(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", allowPath, err)
	}
	if summary {
		skips, err := readRecords(files)
		if err != nil {
			return err
		}
		printSkips(os.Stdout, skips, allow, allowPath)
		return nil
	}

	r := newReport(os.Stdout, verbose)
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] == '\n' {
				line = line[:len(line)-1]
			}
			r.Line(line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if record != "" {
		if err := appendRecords(record, r.Skips); err != nil {
			return err
		}
	}
	bad := printSkips(os.Stdout, r.Skips, allow, allowPath)
	switch {
	case r.Failed:
		return errors.New("tests failed")
	case bad > 0 && inCI():
		return fmt.Errorf("CI=true: %d skipped test(s) with a reason that no pattern of %s allows", bad, allowPath)
	}
	return nil
}

func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// printSkips lists the skips and returns how many the allow-list does not allow.
func printSkips(w io.Writer, skips []Skip, allow allowList, allowPath string) int {
	if len(skips) == 0 {
		fmt.Fprintln(w, "skipped tests: none")
		return 0
	}
	bad := 0
	for _, s := range skips {
		if !allow.allows(s) {
			bad++
		}
	}
	fmt.Fprintf(w, "skipped tests: %d (%d not allowed in CI by %s)\n", len(skips), bad, allowPath)
	for _, s := range skips {
		mark := "SKIP   "
		if allow.allows(s) {
			mark = "allowed"
		}
		fmt.Fprintf(w, "  %s %s\n", mark, s)
	}
	return bad
}

func appendRecords(path string, skips []Skip) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, s := range skips {
		if err := enc.Encode(s); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// readRecords reads the files appendRecords wrote; a missing one holds none.
func readRecords(files []string) ([]Skip, error) {
	var out []Skip
	for _, path := range files {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(f)
		for dec.More() {
			var s Skip
			if err := dec.Decode(&s); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			out = append(out, s)
		}
		f.Close()
	}
	return out, nil
}
