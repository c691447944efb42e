package spec

import "testing"

func TestParseMonitorAggregation(t *testing.T) {
	for in, want := range map[string]MonitorAggregation{
		"": AggregationNone, "none": AggregationNone, "disabled": AggregationNone, "lowest": AggregationLowest,
		"Low": AggregationLow, "medium": AggregationMedium, "max": AggregationMax, "maximum": AggregationMax,
		"3": AggregationMedium, "0": AggregationNone,
	} {
		if got, err := ParseMonitorAggregation(in); err != nil || got != want {
			t.Errorf("%q: %v (%v), want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"5", "-1", "high"} {
		if _, err := ParseMonitorAggregation(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestParseTCPFlags(t *testing.T) {
	if f, err := ParseTCPFlags([]string{"syn", "FIN", " rst"}); err != nil || f != DefaultReportFlags {
		t.Errorf("syn,fin,rst: %#x (%v), want %#x", f, err, DefaultReportFlags)
	}
	if f, err := ParseTCPFlags([]string{"all"}); err != nil || f != 0xff {
		t.Errorf("all: %#x (%v)", f, err)
	}
	if _, err := ParseTCPFlags([]string{"syn", "ecn"}); err == nil {
		t.Error("ecn accepted")
	}
}
