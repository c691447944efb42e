package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The parsers read the reports the benchmark programs print (their
// report functions), in both trees: a change to those formats must
// change these and their testdata too.

var (
	// "  cilium-cni + agent (native)   12.3   45.6   78.9   123.4": p50,
	// p99, max, round wall (ms).
	cniCiliumRow = regexp.MustCompile(`(?m)^\s+cilium-cni \+ agent \(\w+\)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s*$`)
	// "  ratio cilium / bridge   1.23   2.34": p50, p99.
	cniRatioRow = regexp.MustCompile(`(?m)^\s+ratio cilium / bridge\s+([\d.]+)\s+([\d.]+)\s*$`)
	cniMemory   = regexp.MustCompile(`(?m)^agent memory with (\d+) endpoints: VmRSS ([\d.]+) MB`)
)

// parseCNI reads bench/cni's ADD latency of cilium-cni with the agent,
// its ratio to bridge's in the same run, and the agent's VmRSS.
func parseCNI(out string) ([]sample, error) {
	var s []sample
	m := cniCiliumRow.FindStringSubmatch(out)
	if m == nil {
		return nil, errors.New("no cilium-cni + agent row")
	}
	s = append(s, sample{"ADD p50", "ms", num(m[1])}, sample{"ADD p99", "ms", num(m[2])})
	if m = cniRatioRow.FindStringSubmatch(out); m == nil {
		return nil, errors.New("no ratio cilium / bridge row")
	}
	s = append(s, sample{"ADD p99, cilium / bridge", "ratio", num(m[2])})
	if m = cniMemory.FindStringSubmatch(out); m == nil {
		return nil, errors.New("no agent memory line")
	}
	s = append(s, sample{fmt.Sprintf("agent VmRSS, %s endpoints", m[1]), "MB", num(m[2])})
	return s, nil
}

var (
	// A row of the lab's table: policies, identities, flips/new pods, then
	// allow, deny, new pod, write and answered (since 2026-12-04: not in
	// an earlier base's), each p50 and p99 as Go durations ("-" when none
	// was measured).
	policyLabRow = regexp.MustCompile(`^(\d+)\s+\d+\s+\d+/\d+((?:\s+\S+){8}(?:\s+\S+\s+\S+)?)\s*$`)
	// A row of the churn table: identities, CPU per add, add p50, add
	// p99, lost.
	policyChurnRow = regexp.MustCompile(`^(\d+)\s+(\S+)\s+\S+\s+(\S+)\s+(\d+)\s*$`)
	// The churn report's last line.
	policyChurnEnd = regexp.MustCompile(`(?m)^CPU per add, \d+ / \d+ identities: `)
)

// parsePolicy reads bench/policy's implementation delays on the lab, at
// each load, and its CPU per identity add at each scale: both, or the
// one its -parts ran.
func parsePolicy(out string) ([]sample, error) {
	var s []sample
	// Each report, when there, must be whole: its last line follows the
	// table.
	if strings.Contains(out, "\nImplementation delay on a lab cluster") && !strings.Contains(out, "\n(write: ") {
		return nil, errors.New("the lab's report is cut short")
	}
	if strings.Contains(out, "\nIdentity churn:") && !policyChurnEnd.MatchString(out) {
		return nil, errors.New("the identity churn's report is cut short")
	}
	for _, line := range section(out, "Implementation delay on a lab cluster") {
		m := policyLabRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		type column struct {
			name string
			col  int
		}
		cols := strings.Fields(m[2])
		figures := []column{{"allow p50", 0}, {"allow p99", 1}, {"new pod p50", 4}, {"new pod p99", 5}}
		if len(cols) == 10 {
			figures = append(figures, column{"answered p50", 8}, column{"answered p99", 9})
		}
		for _, c := range figures {
			v, err := durationMS(cols[c.col])
			if err != nil {
				return nil, fmt.Errorf("lab row %q: %w", line, err)
			}
			s = append(s, sample{fmt.Sprintf("lab, %s policies: %s", m[1], c.name), "ms", v})
		}
	}
	for _, line := range section(out, "Identity churn:") {
		m := policyChurnRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, c := range []struct {
			name, v, unit string
			per           time.Duration
		}{{"CPU per add", m[2], "µs", time.Microsecond}, {"add p99", m[3], "ms", time.Millisecond}} {
			d, err := time.ParseDuration(c.v)
			if err != nil {
				return nil, fmt.Errorf("churn row %q: %w", line, err)
			}
			s = append(s, sample{fmt.Sprintf("churn, %s identities: %s", m[1], c.name), c.unit, float64(d) / float64(c.per)})
		}
	}
	if len(s) == 0 {
		return nil, errors.New("no rows of the lab's implementation delays or of the identity churn")
	}
	return s, nil
}

var (
	svcProgrammed = regexp.MustCompile(`(?m)^\s+every frontend and backend in the BPF maps (\S+) after the first create, (\S+) after the last$`)
	svcChange     = regexp.MustCompile(`(?m)^\s+p50 ([\d.]+) ms \[[^]]*\]\s+p99 ([\d.]+) ms \[`)
	svcHeap       = regexp.MustCompile(`(?m)^\s+Go heap in use after GC: [\d.]+ MiB before the Services, ([\d.]+) MiB with them .*; live heap [\d.]+ -> ([\d.]+) MiB`)
	svcServices   = regexp.MustCompile(`(?m)^Service source; (\d+) ClusterIP Services`)
	svcAgentShare = regexp.MustCompile(`(?m)^\s+\(the agent's share, informers included: about (-?[\d.]+) MiB\)$`)
)

// parseServices reads bench/services' control plane: the time to program
// every Service, an EndpointSlice change's latency to the maps, and the
// Go heap with the Services.
func parseServices(out string) ([]sample, error) {
	n := svcServices.FindStringSubmatch(out)
	p := svcProgrammed.FindStringSubmatch(out)
	c := svcChange.FindStringSubmatch(out)
	h := svcHeap.FindStringSubmatch(out)
	a := svcAgentShare.FindStringSubmatch(out)
	if n == nil || p == nil || c == nil || h == nil || a == nil {
		return nil, errors.New("no control plane report (its Services, time to program, changes and heap lines)")
	}
	first, err := durationMS(p[1])
	if err != nil {
		return nil, fmt.Errorf("time to program: %w", err)
	}
	last, err := durationMS(p[2])
	if err != nil {
		return nil, fmt.Errorf("time to program: %w", err)
	}
	// The agent's share is a difference of two heaps; small runs can make
	// it 0 or less, which no ratio can take.
	share := num(a[1])
	if share <= 0 {
		share = math.NaN()
	}
	return []sample{
		{"EndpointSlice change to maps p50", "ms", num(c[1])},
		{"EndpointSlice change to maps p99", "ms", num(c[2])},
		{fmt.Sprintf("%s Services in the maps, after the first create", n[1]), "ms", first},
		{fmt.Sprintf("%s Services in the maps, after the last create", n[1]), "ms", last},
		{"Go heap in use with the Services", "MiB", num(h[1])},
		{"live Go heap with the Services", "MiB", num(h[2])},
		{"the agent's share of the live heap", "MiB", share},
	}, nil
}

// section is the lines from the one starting with header to the next
// empty line.
func section(out, header string) []string {
	var lines []string
	in := false
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		switch {
		case !in && strings.HasPrefix(line, header):
			in = true
		case in && strings.TrimSpace(line) == "":
			return lines
		case in:
			lines = append(lines, line)
		}
	}
	return lines
}

// num is a number the regexps matched; NaN if it is none after all.
func num(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// durationMS is a Go duration in milliseconds; "-" (nothing measured) is
// NaN, which the statistics leave out.
func durationMS(s string) (float64, error) {
	if s == "-" {
		return math.NaN(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return float64(d) / float64(time.Millisecond), nil
}
