package podruntime

import "time"

// backoff is the kubelet's crash-loop back-off: the first restart is immediate, then
// the delay starts at Initial and doubles up to Max, and starts over once the
// container has run for Reset without exiting.
type backoff struct {
	Initial time.Duration
	Max     time.Duration
	Reset   time.Duration

	next    time.Duration
	started bool
}

// delay returns how long to wait before the next start of a container that ran for
// ran before exiting, and advances the back-off.
func (b *backoff) delay(ran time.Duration) time.Duration {
	if ran >= b.Reset {
		b.started, b.next = false, 0
	}
	if !b.started {
		b.started, b.next = true, b.Initial
		return 0
	}
	d := b.next
	b.next = min(2*b.next, b.Max)
	return d
}
