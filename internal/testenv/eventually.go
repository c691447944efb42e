package testenv

import (
	"fmt"
	"testing"
	"time"
)

// The first poll comes soon after the first try, so that a condition
// that is nearly true costs little; then the polls slow down to
// maxInterval, so that an expensive condition (kubectl, a dump of a map)
// does not load what it watches.
const (
	firstInterval = 10 * time.Millisecond
	maxInterval   = 500 * time.Millisecond
)

// Eventually calls cond until it returns nil, and fails the test with
// cond's last error if that has not happened after timeout. cond runs at
// least once. Call it from the test's goroutine, as t.Fatal.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatal(err)
	}
}

func poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	interval := firstInterval
	for {
		err := cond()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("not true after %s: %w", timeout, err)
		}
		// Waiting between polls is the point here, bounded by the deadline.
		time.Sleep(min(interval, left))
		interval = min(2*interval, maxInterval)
	}
}
