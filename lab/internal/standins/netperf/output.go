package netperf

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// histogram keeps latencies in microsecond buckets up to 100ms (and the exact
// minimum, maximum and sum): percentiles of any run in bounded memory.
type histogram struct {
	buckets       []uint64
	over          uint64
	count         uint64
	min, max, sum time.Duration
}

const histBuckets = 100_000

func (h *histogram) add(d time.Duration) {
	if h.buckets == nil {
		h.buckets = make([]uint64, histBuckets)
	}
	if h.count == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.sum += d
	h.count++
	if us := d.Microseconds(); us < histBuckets {
		h.buckets[us]++
	} else {
		h.over++
	}
}

// percentile is the latency in microseconds below which p percent of the samples lie.
func (h *histogram) percentile(p float64) int64 {
	if h.count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.count)))
	var seen uint64
	for us, n := range h.buckets {
		seen += n
		if seen >= rank {
			return int64(us)
		}
	}
	return h.max.Microseconds()
}

func (h *histogram) meanMicros() float64 {
	if h.count == 0 {
		return 0
	}
	return float64(h.sum.Nanoseconds()) / float64(h.count) / 1000
}

// selector is one of netperf's output selectors (-o): its column title and
// how to print its value.
type selector struct {
	title string
	value func(Result) string
}

func micros(d time.Duration) string { return fmt.Sprint(d.Microseconds()) }

var selectors = map[string]selector{
	"MIN_LATENCY":      {"Minimum Latency Microseconds", func(r Result) string { return micros(r.Latency.min) }},
	"MAX_LATENCY":      {"Maximum Latency Microseconds", func(r Result) string { return micros(r.Latency.max) }},
	"MEAN_LATENCY":     {"Mean Latency Microseconds", func(r Result) string { return fmt.Sprintf("%.2f", r.Latency.meanMicros()) }},
	"P50_LATENCY":      {"50th Percentile Latency Microseconds", func(r Result) string { return fmt.Sprint(r.Latency.percentile(50)) }},
	"P90_LATENCY":      {"90th Percentile Latency Microseconds", func(r Result) string { return fmt.Sprint(r.Latency.percentile(90)) }},
	"P99_LATENCY":      {"99th Percentile Latency Microseconds", func(r Result) string { return fmt.Sprint(r.Latency.percentile(99)) }},
	"TRANSACTION_RATE": {"Transaction Rate Tran/s", func(r Result) string { return fmt.Sprintf("%.2f", r.TransactionRate()) }},
	"THROUGHPUT": {"Throughput", func(r Result) string {
		t, _ := r.Throughput()
		return fmt.Sprintf("%.2f", t)
	}},
	"THROUGHPUT_UNITS":   {"Throughput Units", func(r Result) string { _, u := r.Throughput(); return u }},
	"ELAPSED_TIME":       {"Elapsed Time (sec)", func(r Result) string { return fmt.Sprintf("%.2f", r.Elapsed.Seconds()) }},
	"PROTOCOL":           {"Protocol", func(r Result) string { return strings.SplitN(r.Test, "_", 2)[0] }},
	"LOCAL_BYTES_SENT":   {"Local Bytes Sent", func(r Result) string { return fmt.Sprint(r.Sent) }},
	"REMOTE_BYTES_RECVD": {"Remote Bytes Received", func(r Result) string { return fmt.Sprint(r.Received) }},
}

// defaultSelectors are printed without -o.
var defaultSelectors = []string{"THROUGHPUT", "THROUGHPUT_UNITS"}

// parseSelectors splits an -o list, naming an unknown selector.
func parseSelectors(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.ToUpper(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		if _, ok := selectors[s]; !ok {
			return nil, fmt.Errorf("output selector %q is not one the lab's netperf knows", s)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no output selectors in %q", list)
	}
	return out, nil
}

// format prints the selectors' titles and then their values, comma-separated,
// as netperf's CSV output does.
func format(sel []string, r Result) string {
	titles, values := make([]string, len(sel)), make([]string, len(sel))
	for i, s := range sel {
		titles[i] = selectors[s].title
		values[i] = selectors[s].value(r)
	}
	return strings.Join(titles, ",") + "\n" + strings.Join(values, ",") + "\n"
}
