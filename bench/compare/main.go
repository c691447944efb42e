// Command compare runs the benchmarks of two revisions in one run on one
// machine: the current tree (head, uncommitted changes included) and an
// earlier commit (-base), checked out in a git worktree of its own. Each
// tree builds the binaries its benchmarks need into its own bin (the
// current tree's bin, as make bench-* does; the base's in the worktree)
// and its own benchmark programs, so that a benchmark that links the
// agent's packages in process (bench/services' control plane,
// bench/policy's churn) measures that tree's code. The programs run alternately, base and head, for -reps
// repetitions; their headline figures are read from what they print. It
// prints, per figure, each tree's median and head/base as the geometric
// mean of the per-repetition ratios with a 95% confidence interval, and a
// verdict per part. The worktree, the builds and everything the programs
// make are removed at the end, after an error or Ctrl-C too. It needs
// root, as the benchmarks do: `make bench-compare`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	base  string
	parts []string
	reps  int
	// flags holds each part's flags for its benchmark program, beyond
	// those the command sets itself (partFlags).
	flags map[string][]string
	// save, when set, is a directory that keeps every run's output.
	save string
}

func main() {
	o := options{flags: map[string][]string{}}
	flag.StringVar(&o.base, "base", "", "the revision to compare the current tree with (a commit, tag or branch); required")
	parts := flag.String("parts", strings.Join(partNames(), ","), "what to compare (comma separated): "+strings.Join(partNames(), ", "))
	flag.IntVar(&o.reps, "reps", 3, "repetitions of every part in each tree, interleaved")
	for _, p := range allParts {
		flag.Func(p.name+"-flags", fmt.Sprintf("%s's flags (default %q; it sets %s itself)", p.program,
			strings.Join(p.defaults, " "), strings.Join(p.owned, " ")), func(s string) error {
			o.flags[p.name] = strings.Fields(s)
			return nil
		})
	}
	flag.StringVar(&o.save, "save", "", "a directory to keep each run's output in (part-tree-rep.txt)")
	flag.Parse()
	o.parts = splitList(*parts)
	for _, p := range allParts {
		if _, set := o.flags[p.name]; !set {
			o.flags[p.name] = p.defaults
		}
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/compare:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// An interrupt reaches the running benchmark (see runProgram), which
	// removes what it made; then the worktree goes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := run(ctx, log, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/compare:", err)
		os.Exit(1)
	}
	log.Info("done", "took", time.Since(start).Round(time.Second))
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (o options) validate() error {
	if o.base == "" {
		return errors.New("-base: required, e.g. -base afa0859")
	}
	if strings.HasPrefix(o.base, "-") {
		return fmt.Errorf("-base %q: not a revision", o.base)
	}
	if len(o.parts) == 0 {
		return fmt.Errorf("-parts: name at least one of %s", strings.Join(partNames(), ", "))
	}
	for i, name := range o.parts {
		if findPart(name) == nil {
			return fmt.Errorf("-parts %q: want some of %s", name, strings.Join(partNames(), ", "))
		}
		if slices.Contains(o.parts[:i], name) {
			return fmt.Errorf("-parts: %s twice", name)
		}
	}
	if o.reps < 1 || o.reps > 50 {
		return fmt.Errorf("-reps %d: want 1..50", o.reps)
	}
	for _, p := range allParts {
		for _, f := range o.flags[p.name] {
			name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
			if strings.HasPrefix(f, "-") && slices.Contains(p.owned, "-"+name) {
				return fmt.Errorf("-%s-flags: %s is the command's to set", p.name, f)
			}
		}
	}
	return nil
}

func run(ctx context.Context, log *slog.Logger, o options) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root: the benchmarks make namespaces, load BPF programs and run labs")
	}
	var parts []*part
	for _, name := range o.parts {
		parts = append(parts, findPart(name))
	}
	w, err := newWorkspace(ctx, log, o.base)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.remove(log)) }()
	if err := w.build(ctx, log, parts, o.flags); err != nil {
		return err
	}
	res := &results{base: w.base.rev, head: w.head.rev, headDirty: w.headDirty}
	for _, p := range parts {
		if err := measurePart(ctx, log, o, w, p, res); err != nil {
			// What was measured before is still worth reading.
			if res.measured() {
				res.report(os.Stdout, o)
			}
			return err
		}
	}
	res.report(os.Stdout, o)
	return nil
}
