// Package netperf is the lab's stand-in for netperf and netserver, the programs of
// the quay.io/cilium/network-perf image that `cilium connectivity perf` runs
// (Debian has no netperf in main). The client takes the command lines the suite
// builds (-H, -l, -t, and after "--": -o output selectors, -m, -r, -R) and prints
// what it parses: result lines of comma-separated selector values. The tests are
// netperf's: TCP_RR, TCP_CRR, UDP_RR (request/response latency and rate) and
// TCP_STREAM, UDP_STREAM (throughput).
//
// Client and server talk a protocol of their own, not netperf's: a control
// connection (TCP, port 12865) carries one JSON request and its answer (the data
// port), the test runs on the data socket, and a last exchange returns what the
// server received. A stand-in client therefore works only with a stand-in
// server.
package netperf

import (
	"fmt"
	"time"
)

// DefaultPort is netserver's control port.
const DefaultPort = 12865

// Limits a server holds a request to: a client can ask for work, not without bound.
const (
	MaxDuration   = time.Hour
	MaxTCPMessage = 16 << 20
	MaxUDPMessage = 65507
	maxLine       = 4096
	maxTests      = 64
)

// Tests the stand-in runs.
const (
	TCPRR     = "TCP_RR"
	TCPCRR    = "TCP_CRR"
	UDPRR     = "UDP_RR"
	TCPStream = "TCP_STREAM"
	UDPStream = "UDP_STREAM"
)

// request opens a test on the control connection.
type request struct {
	Test     string        `json:"test"`
	Duration time.Duration `json:"duration"`
	// ReqSize and RspSize for request/response tests, MsgSize for streams.
	ReqSize int `json:"req_size,omitempty"`
	RspSize int `json:"rsp_size,omitempty"`
	MsgSize int `json:"msg_size,omitempty"`
}

// answer is the server's reply to a request (the data port) and to done (what
// it received); Error when it refuses.
type answer struct {
	Port     int    `json:"port,omitempty"`
	Bytes    uint64 `json:"bytes,omitempty"`
	Messages uint64 `json:"messages,omitempty"`
	Error    string `json:"error,omitempty"`
}

// done ends a test.
type done struct {
	Done bool `json:"done"`
}

func isUDP(test string) bool { return test == UDPRR || test == UDPStream }

func isStream(test string) bool { return test == TCPStream || test == UDPStream }

// validate checks a request whole, naming what is wrong.
func (r request) validate() error {
	switch r.Test {
	case TCPRR, TCPCRR, UDPRR, TCPStream, UDPStream:
	default:
		return fmt.Errorf("test %q is not one of TCP_RR, TCP_CRR, UDP_RR, TCP_STREAM, UDP_STREAM", r.Test)
	}
	if r.Duration <= 0 || r.Duration > MaxDuration {
		return fmt.Errorf("duration %v is not within (0, %v]", r.Duration, MaxDuration)
	}
	limit := MaxTCPMessage
	if isUDP(r.Test) {
		limit = MaxUDPMessage
	}
	sizes := map[string]int{"request size": r.ReqSize, "response size": r.RspSize}
	if isStream(r.Test) {
		sizes = map[string]int{"message size": r.MsgSize}
	}
	for what, n := range sizes {
		if n < 1 || n > limit {
			return fmt.Errorf("%s %d is not within [1, %d] for %s", what, n, limit, r.Test)
		}
	}
	return nil
}
