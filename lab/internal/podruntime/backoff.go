package podruntime

import "time"

// backoff is the kubelet's crash-loop back-off: the delay before restarting a
// container doubles with each restart up to Max and starts over once the container
// has run for Reset without exiting.
type backoff struct {
	Initial time.Duration
	Max     time.Duration
	Reset   time.Duration

	next time.Duration
}

// delay returns how long to wait before the next start of a container that ran for
// ran before exiting, and advances the back-off.
func (b *backoff) delay(ran time.Duration) time.Duration {
	if b.next == 0 || ran >= b.Reset {
		b.next = b.Initial
	}
	d := b.next
	b.next = min(b.next*2, b.Max)
	return d
}
