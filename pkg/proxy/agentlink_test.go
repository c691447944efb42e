package proxy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// The proxy follows the agent's policy file: each replacement is loaded,
// and a file that does not parse (or goes) leaves the proxy judging by
// the last good one.
func TestWatchPolicy(t *testing.T) {
	dir := t.TempDir()
	path := PolicyFile(dir)
	p := New(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go WatchPolicy(ctx, path, p, nil)
	write := func(s string) {
		t.Helper()
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	await := func(rev uint64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); p.Revision() != rev; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("revision %d, want %d", p.Revision(), rev)
			}
		}
	}
	write(`{"revision": 3, "endpoints": [{"id": 7, "identity": 1000, "ipv4": "10.0.0.7"}]}`)
	await(3)
	write(`{"revision": 4, "endpoints": [{"id": 7, "identity": 1000, "ipv4": "10.0.0.7", "ports": [{"direction": 2, "protocol": 6, "port": 80, "allows": [{"wildcard": true, "l7": {"parser": 1, "http": [{"path": "("}]}}]}]}]}`)
	time.Sleep(500 * time.Millisecond)
	await(3) // an HTTP rule that does not compile
	write(`not json`)
	time.Sleep(500 * time.Millisecond)
	await(3)
	write(`{"revision": 5}`)
	await(5)
	os.Remove(path)
	time.Sleep(500 * time.Millisecond)
	await(5)
}

// Each policy the proxy loads from the file is acknowledged to the agent
// with the agent's run, again until the agent takes it; one that does
// not load, or that names no run, is not.
func TestWatchPolicyAcknowledges(t *testing.T) {
	dir := t.TempDir()
	path := PolicyFile(dir)
	acks := make(chan Ack, 16)
	var calls atomic.Int32
	p := New(Config{AckPolicy: func(_ context.Context, a Ack) error {
		if calls.Add(1) == 1 {
			return errors.New("the agent's socket is not up yet")
		}
		acks <- a
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	write := func(s string, mod time.Time) {
		t.Helper()
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if !mod.IsZero() {
			if err := os.Chtimes(tmp, mod, mod); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	next := func(want Ack) {
		t.Helper()
		select {
		case a := <-acks:
			if a != want {
				t.Fatalf("acknowledged %+v, want %+v", a, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no acknowledgement, want %+v", want)
		}
	}
	// Before the proxy watches: loaded when it starts.
	write(`{"revision": 3, "run": 7}`, time.Time{})
	go WatchPolicy(ctx, path, p, nil)
	next(Ack{Run: 7, Revision: 3})
	write(`{"revision": 4, "run": 7, "endpoints": [{"id": 7, "identity": 1000, "ipv4": "10.0.0.7", "ports": [{"direction": 2, "protocol": 6, "port": 80, "allows": [{"wildcard": true, "l7": {"parser": 1, "http": [{"path": "("}]}}]}]}]}`, time.Time{})
	write(`{"revision": 5, "run": 7}`, time.Time{})
	next(Ack{Run: 7, Revision: 5})
	write(`{"revision": 6}`, time.Time{})
	write(`{"revision": 7, "run": 8}`, time.Time{})
	next(Ack{Run: 8, Revision: 7})
	// A replacement of the same size and time is seen by its bytes.
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	write(`{"revision": 8, "run": 8}`, st.ModTime())
	next(Ack{Run: 8, Revision: 8})
	if p.Revision() != 8 {
		t.Fatalf("revision %d, want 8", p.Revision())
	}
}
