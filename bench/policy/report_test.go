package main

import (
	"strings"
	"testing"
	"time"
)

// The report prints both scales and judges the ratio of CPU per add.
func TestReport(t *testing.T) {
	run := func(ids int, cpu time.Duration) churnResult {
		return churnResult{identities: ids, adds: 3, cpuPerAdd: cpu,
			latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}}
	}
	var b strings.Builder
	report(&b, []churnResult{run(100, time.Millisecond), run(100, time.Millisecond)},
		[]churnResult{run(10000, 3*time.Millisecond), run(10000, 3*time.Millisecond)})
	out := b.String()
	for _, want := range []string{"100 ", "10000 ", "CPU per add, 10000 / 100 identities: 3.000", "target <= 2.00: missed"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
