package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Traces configures the trace events of forwarded packets.
type Traces struct {
	// Enabled emits them; drops and policy verdicts are emitted always.
	Enabled     bool
	Aggregation MonitorAggregation
	// ReportFlags are the TCP flags (bits of the header's flag byte) whose
	// first sighting in a direction of a connection is news under
	// AggregationMedium; ReportInterval is how long such a direction
	// stays quiet at most, in whole seconds (at least one).
	ReportFlags    uint8
	ReportInterval time.Duration
}

// Cilium's defaults for monitor-aggregation-flags and -interval.
const (
	DefaultReportFlags    = tcpFIN | tcpSYN | tcpRST
	DefaultReportInterval = 5 * time.Second
)

// ReportSeconds is ReportInterval as the datapath counts it.
func (t Traces) ReportSeconds() uint32 {
	return uint32(max(t.ReportInterval/time.Second, 1))
}

// MonitorAggregation is how the datapath thins its traces: Cilium's
// monitor-aggregation levels, bpf/lib/common.h's enum (internal/datapath
// checks the numbers).
type MonitorAggregation uint8

const (
	// AggregationNone traces every forwarded packet.
	AggregationNone = MonitorAggregation(0)
	// AggregationLowest leaves out traces where packets are received
	// (from-network, from-overlay): a packet is traced once at most.
	AggregationLowest = MonitorAggregation(1)
	AggregationLow    = MonitorAggregation(2)
	// AggregationMedium also traces a connection's packets only when
	// they have news: the first, a new TCP flag, or a report interval
	// gone by. Packets without conntrack's word are not traced.
	AggregationMedium = MonitorAggregation(3)
	AggregationMax    = MonitorAggregation(4)
)

var aggregationNames = map[string]MonitorAggregation{
	"": AggregationNone, "none": AggregationNone, "disabled": AggregationNone,
	"lowest": AggregationLowest, "low": AggregationLow, "medium": AggregationMedium,
	"max": AggregationMax, "maximum": AggregationMax,
}

// ParseMonitorAggregation reads a level as Cilium's flag takes it: a name
// or its number.
func ParseMonitorAggregation(s string) (MonitorAggregation, error) {
	if a, ok := aggregationNames[strings.ToLower(s)]; ok {
		return a, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= int(AggregationNone) && n <= int(AggregationMax) {
		return MonitorAggregation(n), nil
	}
	return 0, fmt.Errorf("monitor aggregation %q: want none, lowest, low, medium or maximum", s)
}

func (a MonitorAggregation) String() string {
	switch a {
	case AggregationNone:
		return "none"
	case AggregationLowest:
		return "lowest"
	case AggregationLow:
		return "low"
	case AggregationMedium:
		return "medium"
	case AggregationMax:
		return "maximum"
	}
	return fmt.Sprintf("aggregation(%d)", uint8(a))
}

const (
	tcpFIN uint8 = 1 << iota
	tcpSYN
	tcpRST
	tcpPSH
	tcpACK
	tcpURG
	tcpECE
	tcpCWR
)

var tcpFlagNames = map[string]uint8{
	"none": 0, "all": 0xff, "fin": tcpFIN, "syn": tcpSYN, "rst": tcpRST, "psh": tcpPSH,
	"ack": tcpACK, "urg": tcpURG, "ece": tcpECE, "cwr": tcpCWR,
}

// ParseTCPFlags reads monitor-aggregation-flags: names of TCP flags, or
// all.
func ParseTCPFlags(names []string) (uint8, error) {
	var flags uint8
	for _, n := range names {
		f, ok := tcpFlagNames[strings.ToLower(strings.TrimSpace(n))]
		if !ok {
			return 0, fmt.Errorf("TCP flag %q: want fin, syn, rst, psh, ack, urg, ece, cwr, all or none", n)
		}
		flags |= f
	}
	return flags, nil
}
