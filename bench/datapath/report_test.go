package main

import (
	"strings"
	"testing"
	"time"
)

// TestReportTargets: the report judges (c')/(c) by connect/request/close
// only, and prints intervals and verdicts.
func TestReportTargets(t *testing.T) {
	scenarios := []scenario{{key: "a", name: "(a) node to node"}, {key: "c", name: "(c) pod to pod"}, {key: "c'", name: "(c') policy"}}
	// results[scenario][test][rep]: stream, rr, crr
	results := [][][]float64{
		{{100, 110, 90}, {100, 110, 90}, {100, 110, 90}},
		{{97, 107, 88}, {90, 99, 81}, {90, 99, 81}},
		{{97, 107, 88}, {90, 99, 81}, {80, 88, 72}},
	}
	var b strings.Builder
	report(&b, scenarios, results, time.Second, 3)
	out := b.String()
	for _, want := range []string{
		"(c)/(a) >= 0.95, TCP stream",
		"(c)/(a) >= 0.95, TCP request/response",
		"(c')/(c) >= 0.97, TCP connect/request/close",
		"0.889  [0.889, 0.889]  missed",
		"(c')/(c) is judged by connect/request/close",
		"95% confidence interval",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "(c')/(c) >= 0.97, TCP stream") || strings.Contains(out, "(c')/(c) >= 0.97, TCP request") {
		t.Errorf("(c')/(c) judged by stream or request/response:\n%s", out)
	}
}
