package main

import (
	"os"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := time.Millisecond
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * ms // unsorted on purpose
	}
	for _, tc := range []struct {
		name string
		v    []time.Duration
		p    float64
		want time.Duration
	}{
		{"one sample", []time.Duration{5 * ms}, 0.99, 5 * ms},
		{"p50 of 100 is the 50th", hundred, 0.5, 50 * ms},
		{"p99 of 100 is the 99th", hundred, 0.99, 99 * ms},
		{"p99 of 50 is the largest", hundred[50:], 0.99, 50 * ms},
		{"p50 of 4 is the 2nd", []time.Duration{4 * ms, 1 * ms, 3 * ms, 2 * ms}, 0.5, 2 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.v, tc.p); got != tc.want {
				t.Fatalf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

// TestProcStatus reads this process's own memory, as the bench reads the
// agent's.
func TestProcStatus(t *testing.T) {
	st, err := procStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st["VmRSS"] < 1<<20 || st["VmHWM"] < st["VmRSS"] {
		t.Fatalf("VmRSS %d, VmHWM %d bytes", st["VmRSS"], st["VmHWM"])
	}
}
