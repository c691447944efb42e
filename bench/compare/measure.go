package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// results is what every part measured, by tree and repetition.
type results struct {
	base, head string // commits
	headDirty  bool
	parts      []*partResult
}

type partResult struct {
	part    *part
	flags   []string
	figures []string // in the order the program prints them
	units   map[string]string
	// values[tree][figure][rep]; NaN where a run did not print the figure.
	values map[string]map[string][]float64
	wall   map[string][]time.Duration
}

// measured says whether any run completed.
func (res *results) measured() bool {
	for _, r := range res.parts {
		if len(r.wall["base"])+len(r.wall["head"]) > 0 {
			return true
		}
	}
	return false
}

func newPartResult(p *part, flags []string) *partResult {
	return &partResult{part: p, flags: flags, units: map[string]string{},
		values: map[string]map[string][]float64{"base": {}, "head": {}},
		wall:   map[string][]time.Duration{}}
}

// add records run rep of tree; a figure new at this run gets NaN for the
// runs before.
func (r *partResult) add(tree string, rep int, wall time.Duration, samples []sample) {
	r.wall[tree] = append(r.wall[tree], wall)
	for _, s := range samples {
		if !slices.Contains(r.figures, s.figure) {
			r.figures = append(r.figures, s.figure)
			r.units[s.figure] = s.unit
		}
		v := r.values[tree][s.figure]
		if len(v) > rep {
			continue // printed twice in one run: the first counts
		}
		for len(v) < rep {
			v = append(v, math.NaN())
		}
		r.values[tree][s.figure] = append(v, s.value)
	}
}

// series is a figure's value in each repetition of tree, NaN for those
// that lack it.
func (r *partResult) series(tree, figure string, reps int) []float64 {
	v := slices.Clone(r.values[tree][figure])
	for len(v) < reps {
		v = append(v, math.NaN())
	}
	return v
}

// measurePart runs p's program in both trees, o.reps times each. Within a
// repetition the trees take turns going first (base, head; head, base;
// ...), so that neither always runs on a machine warmed up, or still
// busy, from the other's run.
func measurePart(ctx context.Context, log *slog.Logger, o options, w *workspace, p *part, res *results) error {
	r := newPartResult(p, o.flags[p.name])
	res.parts = append(res.parts, r)
	for rep := range o.reps {
		order := w.trees()
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, t := range order {
			args := append(p.args(t), o.flags[p.name]...)
			log.Info("running", "part", p.name, "rep", rep+1, "of", o.reps, "tree", t.name,
				"command", p.program+" "+strings.Join(args, " "))
			start := time.Now()
			out, err := runProgram(ctx, t, t.progs[p.program], args)
			wall := time.Since(start)
			if serr := o.saveOutput(p.name, t.name, rep, out); serr != nil {
				log.Warn("saving the output", "error", serr)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s, repetition %d, %s: interrupted: %w", p.name, rep+1, t.name, ctx.Err())
			}
			if err != nil {
				return fmt.Errorf("%s, repetition %d: %w", p.name, rep+1, err)
			}
			samples, err := p.parse(out)
			if err != nil {
				return fmt.Errorf("%s, repetition %d, %s: reading its report: %w", p.name, rep+1, t.name, err)
			}
			r.add(t.name, rep, wall, samples)
			log.Info("ran", "part", p.name, "rep", rep+1, "tree", t.name, "took", wall.Round(time.Second), "figures", summary(samples))
		}
	}
	return nil
}

// saveOutput keeps a run's report under -save, if given.
func (o options) saveOutput(part, tree string, rep int, out string) error {
	if o.save == "" {
		return nil
	}
	if err := os.MkdirAll(o.save, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.save, fmt.Sprintf("%s-%s-%d.txt", part, tree, rep+1)), []byte(out), 0o644)
}

func summary(samples []sample) string {
	var parts []string
	for _, s := range samples {
		parts = append(parts, fmt.Sprintf("%s=%.4g", s.figure, s.value))
	}
	return strings.Join(parts, "; ")
}
