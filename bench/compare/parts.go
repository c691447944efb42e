package main

import (
	"slices"
	"strings"
)

// A part is a benchmark program that both trees run, with the flags the
// comparison gives it and the figures read from what it prints.
type part struct {
	name    string
	program string // its package, as go build names it
	// targets are the Makefile targets that build what its -bin needs,
	// given its flags.
	targets func(flags []string) []string
	// defaults are its flags unless -<name>-flags says otherwise: small
	// enough that a repetition takes minutes. owned are flags the command
	// sets itself (args), which -<name>-flags may not.
	defaults, owned []string
	args            func(t *tree) []string
	parse           func(out string) ([]sample, error)
}

// A sample is one figure of one run. Every figure is better lower: a
// latency, CPU time or memory.
type sample struct {
	figure string
	unit   string
	value  float64
}

var allParts = []*part{
	{
		name:    "cni",
		program: "./bench/cni",
		targets: func([]string) []string { return []string{"build-cilium", "build-cni"} },
		// Two rounds of 25 concurrent ADDs and 50 endpoints: on 2 cores
		// a round of 20 took 5 s idle and a minute busy, one of 50 with
		// 100 endpoints after it 7 minutes busy.
		defaults: []string{"-rounds", "2", "-pods", "25", "-endpoints", "50"},
		owned:    []string{"-bin"},
		args:     func(t *tree) []string { return []string{"-bin", t.bin} },
		parse:    parseCNI,
	},
	{
		name:    "policy",
		program: "./bench/policy",
		// Only the lab needs binaries: -policy-flags "-parts churn" runs
		// without.
		targets: func(flags []string) []string {
			if slices.Contains(strings.Split(flagValue(flags, "parts", "lab,churn"), ","), "lab") {
				return []string{"build-lab", "build-cilium"}
			}
			return nil
		},
		// The lab part with fewer flips, new pods and fillers than its
		// defaults (200, 30, 1000); churn once per run (the command's
		// repetitions are the interleaved ones) with half the adds.
		defaults: []string{"-flips", "50", "-new-pods", "10", "-fillers", "300", "-reps", "1", "-adds", "100"},
		owned:    []string{"-bin"},
		// Both parts unless -policy-flags says -parts: of two, the last
		// counts.
		args:  func(t *tree) []string { return []string{"-bin", t.bin, "-parts", "lab,churn"} },
		parse: parsePolicy,
	},
	{
		name:    "services",
		program: "./bench/services",
		// The control plane part runs pkg/loadbalancer in process: no
		// binaries.
		targets: func([]string) []string { return nil },
		// The fake clientset's creates slow down as it fills: on 2 busy
		// cores 1,000 Services took 20 s, 5,000 nearly 3 minutes, twice
		// (its own share of the heap is measured apart first).
		defaults: []string{"-cp-services", "2000", "-cp-duration", "5s"},
		owned:    []string{"-bin", "-parts"},
		args:     func(t *tree) []string { return []string{"-bin", t.bin, "-parts", "cp"} },
		parse:    parseServices,
	},
}

func partNames() []string {
	var out []string
	for _, p := range allParts {
		out = append(out, p.name)
	}
	return out
}

func findPart(name string) *part {
	i := slices.IndexFunc(allParts, func(p *part) bool { return p.name == name })
	if i < 0 {
		return nil
	}
	return allParts[i]
}

// flagValue is the value of the last -name or --name in flags (as the
// flag package reads them), or def.
func flagValue(flags []string, name, def string) string {
	v := def
	for i, f := range flags {
		k, val, hasVal := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !strings.HasPrefix(f, "-") || k != name {
			continue
		}
		if hasVal {
			v = val
		} else if i+1 < len(flags) {
			v = flags[i+1]
		}
	}
	return v
}
