package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// loopClient is a client script for startClient: setup runs once (it
// prints "streaming..." once ready, and may set port), round every
// interval until a line (or EOF) arrives on stdin or the time limit
// passes. A round that raises fails: the first failure ends the loop,
// or with keepGoing is counted and the loop goes on. It prints a
// progress line a second, and at the end one JSON summary
// (streamSummary). Times are the machine's clock, which the test shares.
func loopClient(setup, round string, keepGoing bool) string {
	indent := func(code, prefix string) string {
		return prefix + strings.ReplaceAll(strings.TrimSpace(code), "\n", "\n"+prefix)
	}
	onFailure := "break"
	if keepGoing {
		onFailure = "time.sleep(interval)\n        continue"
	}
	return `
import http.client, json, socket, sys, threading, time
host, interval, limit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
stop = threading.Event()
def watch():
    sys.stdin.readline()
    stop.set()
threading.Thread(target=watch, daemon=True).start()
port = 0
` + strings.TrimSpace(setup) + `
start = time.time()
ok, failed, err, gaps, longest, longest_at, first, last = 0, 0, "", 0, 0.0, 0.0, 0.0, 0.0
report = start
while not stop.is_set() and time.time() - start < limit:
    t0 = time.time()
    try:
` + indent(round, "        ") + `
    except Exception as e:
        failed, err = failed + 1, err or "round %d: %r" % (ok + failed + 1, e)
        ` + onFailure + `
    now = time.time()
    if ok > 0:
        gap = now - last
        if gap > 2 * interval:
            gaps += 1
        if gap > longest:
            longest, longest_at = gap, now
    else:
        first = now
    ok, last = ok + 1, now
    if now - report >= 1:
        print("progress", ok, now, flush=True)
        report = now
    time.sleep(max(0.0, interval - (time.time() - t0)))
print(json.dumps({"port": port, "ok": ok, "failed": failed, "error": err, "gaps": gaps,
    "longest": longest, "longest_at": longest_at, "first": first, "last": last}), flush=True)
`
}

// streamClient holds one HTTP keep-alive connection to the server (host:port,
// 8080 by default) and sends a request on it every interval. A failed
// request, or a response on another connection, ends the stream: the one
// connection is gone.
var streamClient = loopClient(`
host, _, p = host.partition(":")
c = http.client.HTTPConnection(host, int(p or 8080), timeout=2)
c.connect()
port = c.sock.getsockname()[1]
print("streaming from port", port, flush=True)
`, `
c.request("GET", "/hostname")
r = c.getresponse()
r.read()
if r.status != 200:
    raise Exception("status %d" % r.status)
if c.sock is None or c.sock.getsockname()[1] != port:
    raise Exception("the response came on another connection")
`, false)

// streamInterval is the time between requests (a request at least every 100 ms).
const streamInterval = 50 * time.Millisecond

// streamSummary is the client's closing line.
type streamSummary struct {
	Port      int     `json:"port"`
	OK        int     `json:"ok"`
	Failed    int     `json:"failed"`
	Error     string  `json:"error"`
	Gaps      int     `json:"gaps"` // responses more than two intervals after the previous one
	Longest   float64 `json:"longest"`
	LongestAt float64 `json:"longest_at"`
	First     float64 `json:"first"`
	Last      float64 `json:"last"`
}

// stream is a streamClient running in a pod through kubectl exec.
type stream struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // stdout, closed at EOF
	mu    sync.Mutex
	last  float64 // time of the latest progress line
	out   strings.Builder
}

// outsideClient names the lab's client outside the cluster as a stream's
// origin.
const outsideClient = "outside"

// startClient runs a client script (streamClient, connectsClient, ...) in pod
// from, or on the outside client, towards to (address[:port]).
func (l *Lab) startClient(from, to, script string) *stream {
	l.t.Helper()
	client := []string{"python3", "-u", "-c", script, to, fmt.Sprint(streamInterval.Seconds()), "600"}
	cmd := exec.Command(filepath.Join(*binDir, "kubectl"), append([]string{"exec", "-i", from, "--"}, client...)...)
	if from == outsideClient {
		cmd = exec.Command(filepath.Join(*binDir, "cilium-lab"), append([]string{"exec", "--state-dir", l.StateDir, outsideClient, "--"}, client...)...)
	}
	cmd.Env = append(os.Environ(), "KUBECONFIG="+l.Kubeconfig)
	s := &stream{cmd: cmd, lines: make(chan string, 16)}
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		l.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{s: s}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go s.read(stdout)
	select {
	case line, ok := <-s.lines:
		if !ok || !strings.HasPrefix(line, "streaming") {
			cmd.Wait()
			l.t.Fatalf("the stream client did not start: %q\n%s", line, s.output())
		}
	case <-time.After(30 * time.Second):
		l.t.Fatalf("the stream client did not connect in 30s\n%s", s.output())
	}
	return s
}

func (s *stream) read(r io.Reader) {
	defer close(s.lines)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		s.mu.Lock()
		s.out.WriteString(line + "\n")
		var n int
		var at float64
		if _, err := fmt.Sscanf(line, "progress %d %g", &n, &at); err == nil {
			s.last = at
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		s.lines <- line
	}
}

func (s *stream) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// progressAfter reports whether the client answered a request after t.
func (s *stream) progressAfter(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last > unixSeconds(t)
}

// stop ends the stream and returns its summary.
func (s *stream) stop(t *testing.T) streamSummary {
	t.Helper()
	s.stdin.Write([]byte("stop\n"))
	s.stdin.Close()
	var sum streamSummary
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				err := s.cmd.Wait()
				t.Fatalf("the stream client ended without a summary: %v\n%s", err, s.output())
			}
			if json.Unmarshal([]byte(line), &sum) == nil {
				if err := s.cmd.Wait(); err != nil {
					t.Errorf("the stream client: %v\n%s", err, s.output())
				}
				return sum
			}
		case <-deadline:
			t.Fatalf("the stream client did not stop in 30s\n%s", s.output())
		}
	}
}

type lockedWriter struct{ s *stream }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.out.Write(b)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func fromUnix(sec float64) time.Time { return time.Unix(0, int64(sec*1e9)) }
