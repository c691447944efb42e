package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The testdata are what the benchmark programs printed in real runs
// (-save); the figures wanted are read off them by eye.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		file  string
		parse func(string) ([]sample, error)
		want  []sample
	}{
		{"cni.txt", parseCNI, []sample{
			{"ADD p50", "ms", 26426.9},
			{"ADD p99", "ms", 45374.3},
			{"ADD p99, cilium / bridge", "ratio", 39.54},
			{"agent VmRSS, 30 endpoints", "MB", 69.4},
		}},
		{"policy.txt", parsePolicy, []sample{
			{"lab, 1 policies: allow p50", "ms", 12.51},
			{"lab, 1 policies: allow p99", "ms", 22.92},
			{"lab, 1 policies: new pod p50", "ms", 0.12},
			{"lab, 1 policies: new pod p99", "ms", 7.86},
			{"lab, 1 policies: answered p50", "ms", 3.79},
			{"lab, 1 policies: answered p99", "ms", 11.4},
			{"lab, 20 policies: allow p50", "ms", 10.57},
			{"lab, 20 policies: allow p99", "ms", 13.46},
			{"lab, 20 policies: new pod p50", "ms", 0.18},
			{"lab, 20 policies: new pod p99", "ms", 0.98},
			{"lab, 20 policies: answered p50", "ms", 4.97},
			{"lab, 20 policies: answered p99", "ms", 5.06},
			{"churn, 100 identities: CPU per add", "µs", 1466},
			{"churn, 100 identities: add p99", "ms", 14.43},
			{"churn, 3000 identities: CPU per add", "µs", 1410},
			{"churn, 3000 identities: add p99", "ms", 9.17},
		}},
		// An earlier base's report: no answered columns.
		{"policy-unanswered.txt", parsePolicy, []sample{
			{"lab, 1 policies: allow p50", "ms", 12.51},
			{"lab, 1 policies: allow p99", "ms", 22.92},
			{"lab, 1 policies: new pod p50", "ms", 0.12},
			{"lab, 1 policies: new pod p99", "ms", 7.86},
			{"lab, 20 policies: allow p50", "ms", 10.57},
			{"lab, 20 policies: allow p99", "ms", 13.46},
			{"lab, 20 policies: new pod p50", "ms", 0.18},
			{"lab, 20 policies: new pod p99", "ms", 0.98},
			{"churn, 100 identities: CPU per add", "µs", 1466},
			{"churn, 100 identities: add p99", "ms", 14.43},
			{"churn, 3000 identities: CPU per add", "µs", 1410},
			{"churn, 3000 identities: add p99", "ms", 9.17},
		}},
		// -parts churn: no lab.
		{"policy-churn.txt", parsePolicy, []sample{
			{"churn, 100 identities: CPU per add", "µs", 1175},
			{"churn, 100 identities: add p99", "ms", 5.79},
			{"churn, 3000 identities: CPU per add", "µs", 1211},
			{"churn, 3000 identities: add p99", "ms", 20.19},
		}},
		{"services.txt", parseServices, []sample{
			{"EndpointSlice change to maps p50", "ms", 3.82},
			{"EndpointSlice change to maps p99", "ms", 93.08},
			{"1000 Services in the maps, after the first create", "ms", 19771},
			{"1000 Services in the maps, after the last create", "ms", 24},
			{"Go heap in use with the Services", "MiB", 35.4},
			{"live Go heap with the Services", "MiB", 28.8},
			{"the agent's share of the live heap", "MiB", 7.2},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out := readTestdata(t, tc.file)
			got, err := tc.parse(out)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("parse: %d figures, want %d:\n%v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.figure != w.figure || g.unit != w.unit || !same(g.value, w.value) {
					t.Errorf("figure %d: %q %s %v, want %q %s %v", i, g.figure, g.unit, g.value, w.figure, w.unit, w.value)
				}
			}
			// A report cut short (a program that died while printing) is an
			// error, not figures missing in silence.
			if _, err := tc.parse(out[:len(out)/3]); err == nil {
				t.Errorf("parse of the first third: no error")
			}
			if _, err := tc.parse(""); err == nil {
				t.Errorf("parse of nothing: no error")
			}
		})
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// same compares to the precision the reports print, NaN equal to NaN.
func same(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

func TestParseServicesNoShare(t *testing.T) {
	out := strings.Replace(readTestdata(t, "services.txt"), "about 7.2 MiB)", "about -0.4 MiB)", 1)
	got, err := parseServices(out)
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; !math.IsNaN(last.value) {
		t.Fatalf("a negative agent's share: %v, want NaN (left out of the ratios)", last.value)
	}
}
