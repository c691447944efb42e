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

// The lab report prints both loads and judges each p99 against 50 ms.
func TestLabReport(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	base := labPhase{policies: 1, identities: 1, allow: ms(5, 6, 7), deny: ms(5, 6, 7), newPod: ms(1, 2), write: ms(2, 3, 4)}
	loaded := labPhase{policies: 1000, identities: 1000, allow: ms(10, 12, 14), deny: ms(60, 70, 80), newPod: ms(10, 60), write: ms(2, 3, 4)}
	var b strings.Builder
	labReport(&b, []labPhase{base, loaded})
	out := b.String()
	for _, want := range []string{
		"allow    p99 with 1000 policies: 14ms [12ms, 14ms], 2.00x the p99 with 1; target <= 50ms: met",
		"deny     p99 with 1000 policies: 80ms [70ms, 80ms], 11.43x the p99 with 1; target <= 50ms: missed",
		"new pod  p99 with 1000 policies: 60ms [10ms, 60ms], 30.00x the p99 with 1; target <= 50ms: undecided",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
