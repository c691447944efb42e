package proxy

import (
	"context"
	"os"
	"path/filepath"
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
