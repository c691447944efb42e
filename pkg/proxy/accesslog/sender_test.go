package accesslog

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"

	"github.com/cilium-go/cilium/internal/testenv"
)

// blockLimit is what a Record call may take at most here: it never
// waits, so only a scheduler's hiccup comes near, and a sender that
// waited for the agent would take forever.
const blockLimit = time.Second

func startSender(t *testing.T, path string, queue int) *Sender {
	t.Helper()
	s := NewSender(path, queue, hivetest.Logger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

func waitConnected(t *testing.T, s *Sender, want bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		if s.Connected() != want {
			return errors.New("the sender's connection is not as wanted yet")
		}
		return nil
	})
}

// record sends r and fails the test if that took long.
func record(t *testing.T, s *Sender, r Record) time.Duration {
	t.Helper()
	start := time.Now()
	s.Record(r)
	took := time.Since(start)
	if took > blockLimit {
		t.Fatalf("Record took %s", took)
	}
	return took
}

func TestRecordsArriveInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accesslog.sock")
	a := startAgent(t, path)
	s := startSender(t, path, 0)
	waitConnected(t, s, true)
	const n = 2000
	for i := range n {
		r := dnsRecord(i)
		if i%10 == 0 {
			r = httpRecord()
			r.Latency = time.Duration(i)
		}
		record(t, s, r)
	}
	for i := range n {
		want := dnsRecord(i)
		if i%10 == 0 {
			want = httpRecord()
			want.Latency = time.Duration(i)
		}
		if got := a.next(t); !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d: %+v, want %+v", i, got, want)
		}
	}
	if s.Dropped() != 0 {
		t.Errorf("%d dropped", s.Dropped())
	}
}

// TestSenderSurvivesTheAgentsRestart: while the agent is away records
// are dropped and counted, at once; once it is back they arrive again.
func TestSenderSurvivesTheAgentsRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accesslog.sock")
	a := startAgent(t, path)
	s := startSender(t, path, 0)
	waitConnected(t, s, true)
	record(t, s, dnsRecord(1))
	if got := a.next(t); got.DNS.Query != dnsRecord(1).DNS.Query {
		t.Fatalf("first record %q", got.DNS.Query)
	}

	a.stop()
	waitConnected(t, s, false)
	var slowest time.Duration
	for i := range 10000 {
		slowest = max(slowest, record(t, s, dnsRecord(i)))
	}
	if s.Dropped() != 10000 {
		t.Errorf("%d dropped while the agent was away, want 10000", s.Dropped())
	}
	t.Logf("the slowest Record call while the agent was away: %s", slowest)

	a = startAgent(t, path)
	waitConnected(t, s, true)
	for i := 100; i < 110; i++ {
		record(t, s, dnsRecord(i))
	}
	for i := 100; i < 110; i++ {
		if got := a.next(t); got.DNS.Query != dnsRecord(i).DNS.Query {
			t.Fatalf("after the restart: %q, want %q", got.DNS.Query, dnsRecord(i).DNS.Query)
		}
	}
	if s.Dropped() != 10000 {
		t.Errorf("%d dropped in all, want the 10000 of the agent's absence", s.Dropped())
	}
}

// TestRecordDoesNotWaitForAWedgedAgent: an agent that accepts but does
// not read fills the socket and the queue; Record goes on dropping.
func TestRecordDoesNotWaitForAWedgedAgent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accesslog.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	s := startSender(t, path, 64)
	waitConnected(t, s, true)
	c := <-accepted
	t.Cleanup(func() { c.Close() })
	var slowest time.Duration
	const n = 100000
	for range n {
		slowest = max(slowest, record(t, s, httpRecord()))
	}
	if s.Dropped() == 0 || s.Dropped() >= n {
		t.Errorf("%d of %d dropped, want some, not all", s.Dropped(), n)
	}
	t.Logf("%d of %d dropped; the slowest Record call: %s", s.Dropped(), n, slowest)
}

// TestARecordOverTheAgentsBoundIsDropped: a request with a megabyte of
// headers is counted as dropped, and the records after it arrive.
func TestARecordOverTheAgentsBoundIsDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accesslog.sock")
	a := startAgent(t, path)
	s := startSender(t, path, 0)
	waitConnected(t, s, true)
	huge := httpRecord()
	huge.HTTP.Headers = map[string][]string{"X-Big": {strings.Repeat("x", maxRecord)}}
	record(t, s, huge)
	record(t, s, dnsRecord(1))
	if got := a.next(t); got.DNS == nil || got.DNS.Query != dnsRecord(1).DNS.Query {
		t.Fatalf("the record after the huge one: %+v", got)
	}
	if s.Dropped() != 1 {
		t.Errorf("%d dropped, want the huge one", s.Dropped())
	}
}
