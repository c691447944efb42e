// Package k8stest runs the operator's controllers in tests.
package k8stest

import (
	"context"
	"sync"
	"testing"
)

// Start runs run until the returned stop, which ends it and waits, as a
// leader that loses its lease does, and reports an error it returned;
// the test's cleanup stops it too. Stopping twice stops once.
func Start(t testing.TB, name string, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
	t.Cleanup(stop)
	return stop
}
