package netperf

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// suiteSelectors is the -o list cilium-cli's netperf benchmark passes.
const suiteSelectors = "MIN_LATENCY,MEAN_LATENCY,MAX_LATENCY,P50_LATENCY,P90_LATENCY,P99_LATENCY,TRANSACTION_RATE,THROUGHPUT,THROUGHPUT_UNITS"

func startNetserver(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("netserver: %v", err)
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// The suite's command lines, and its parsing of the output: the lines that
// start with a digit, nine comma-separated values, latencies in microseconds,
// 10^6bits/s for streams.
func TestSuiteCommandLines(t *testing.T) {
	port := startNetserver(t)
	for _, tc := range []struct {
		test  string
		extra []string
	}{
		{test: "TCP_RR"}, {test: "TCP_CRR"}, {test: "UDP_RR"},
		{test: "TCP_STREAM"}, {test: "TCP_STREAM", extra: []string{"-m", "1500000"}},
		{test: "UDP_STREAM", extra: []string{"-m", "1024"}},
	} {
		t.Run(tc.test+strings.Join(tc.extra, ""), func(t *testing.T) {
			args := append([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "300ms", "-t", tc.test, "--", "-R", "1",
				"-o", suiteSelectors}, tc.extra...)
			var stdout, stderr strings.Builder
			if code := NetperfMain(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var results []string
			for _, l := range strings.Split(stdout.String(), "\n") {
				if l != "" && l[0] >= '0' && l[0] <= '9' {
					results = append(results, l)
				}
			}
			if len(results) != 1 {
				t.Fatalf("want one result line:\n%s", stdout.String())
			}
			v := strings.Split(results[0], ",")
			if len(v) != 9 {
				t.Fatalf("want 9 values: %q", results[0])
			}
			lat := make([]time.Duration, 6)
			for i := range 6 {
				d, err := time.ParseDuration(v[i] + "us")
				if err != nil {
					t.Fatalf("latency %q: %v", v[i], err)
				}
				lat[i] = d
			}
			rate, err1 := strconv.ParseFloat(v[6], 64)
			tput, err2 := strconv.ParseFloat(v[7], 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("rate %q throughput %q", v[6], v[7])
			}
			if strings.HasSuffix(tc.test, "_STREAM") {
				if v[8] != "10^6bits/s" || tput <= 0 {
					t.Errorf("stream throughput %q %q", v[7], v[8])
				}
				return
			}
			if rate <= 0 || lat[0] <= 0 || !(lat[0] <= lat[3] && lat[3] <= lat[4] && lat[4] <= lat[5] && lat[5] <= lat[2]) {
				t.Errorf("request/response: rate %v, latencies min %v p50 %v p90 %v p99 %v max %v", rate, lat[0], lat[3], lat[4], lat[5], lat[2])
			}
		})
	}
}

func TestBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-t", "SCTP_RR", "-H", "127.0.0.1", "-p", "1"}, `test "SCTP_RR"`},
		{[]string{"-l", "-100"}, "only a positive test length"},
		{[]string{"-l", "soon"}, "not a test length"},
		{[]string{"-x"}, "option -x is not one"},
		{[]string{"--", "-o", "MIN_LATENCY,FAVOURITE_COLOUR"}, `"FAVOURITE_COLOUR"`},
		{[]string{"-t", "UDP_STREAM", "--", "-m", "70000"}, "message size 70000"},
		{[]string{"-H"}, "-H needs a value"},
		{[]string{"-H", "127.0.0.1", "-p", "1", "-l", "1"}, "are you sure there is a netserver"},
	} {
		var stderr strings.Builder
		if code := NetperfMain(tc.args, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("netperf %q: exit %d %q; want an error with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	var stderr strings.Builder
	if code := NetserverMain([]string{"-D", "-z"}, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "option -z") {
		t.Errorf("netserver -z: exit %d %q", code, stderr.String())
	}
}

// A netserver refuses what it is not asked properly, naming why, and serves
// the next client.
func TestServerRefusesBadRequests(t *testing.T) {
	port := startNetserver(t)
	for _, tc := range []struct{ line, want string }{
		{`{"test":"TCP_RR","duration":1000000000,"req_size":1,"rsp_size":1,"extra":1}`, "unknown field"},
		{`{"test":"TCP_RR","duration":1000000000,"req_size":0,"rsp_size":1}`, "request size 0"},
		{`{"test":"TCP_STREAM","duration":36000000000000,"msg_size":1}`, "duration 10h0m0s"},
		{`{"test":"UDP_RR","duration":1000000000,"req_size":1,"rsp_size":100000}`, "response size 100000"},
		{strings.Repeat("x", 5000), "longer than 4096"},
		{`not json`, "control message"},
	} {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, tc.line+"\n")
		var a answer
		line, _ := bufio.NewReader(c).ReadBytes('\n')
		c.Close()
		if json.Unmarshal(line, &a) != nil || !strings.Contains(a.Error, tc.want) {
			t.Errorf("request %.60q: answer %q, want an error with %q", tc.line, line, tc.want)
		}
	}
	if _, err := Run(context.Background(), Config{Host: "127.0.0.1", Port: port, Test: TCPRR, Duration: 50 * time.Millisecond,
		ReqSize: 1, RspSize: 1, Network: "tcp"}); err != nil {
		t.Errorf("a good request after the bad ones: %v", err)
	}
}
