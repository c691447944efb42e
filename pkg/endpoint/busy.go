package endpoint

import (
	"context"
	"fmt"
)

// busy is a container whose endpoint is being created or deleted: the
// slow part (identity allocation, waiting for the reconciler and the
// policy engine) runs without the manager's lock, while the container,
// its endpoint id, address and host device stay reserved. Whatever would
// touch the same container, or take the same address or device, waits
// for it to finish and then looks again, as it would have waited for the
// lock; other containers go ahead.
type busy struct {
	spec Spec
	id   uint16
	done chan struct{}
}

// reserveLocked marks the container of s busy with endpoint id until
// release.
func (m *Manager) reserveLocked(s Spec, id uint16) *busy {
	b := &busy{spec: s, id: id, done: make(chan struct{})}
	m.busy[s.ContainerID] = b
	return b
}

// releaseLocked ends b and wakes whoever waits for it.
func (m *Manager) releaseLocked(b *busy) {
	delete(m.busy, b.spec.ContainerID)
	close(b.done)
}

// waitLocked waits, without the lock, until b is done; it returns with
// the lock held, or with ctx's error and the lock not held.
func (m *Manager) waitLocked(ctx context.Context, b *busy) error {
	m.mu.Unlock()
	select {
	case <-b.done:
		m.mu.Lock()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("container %s busy: %w", b.spec.ContainerID, ctx.Err())
	}
}

// busyConflictLocked is a busy container that holds s's address or host
// device, if any.
func (m *Manager) busyConflictLocked(s Spec) *busy {
	for _, b := range m.busy {
		if b.spec.IPv4 == s.IPv4 || b.spec.HostIfName == s.HostIfName {
			return b
		}
	}
	return nil
}
