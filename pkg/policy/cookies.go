package policy

import (
	"slices"
	"strings"
	"sync"
)

// Cookies numbers the sets of origins that policy entries carry, so that
// the datapath's verdict events, which carry the deciding entry's
// cookie, name the rules that decided. Numbers are never reused while
// the agent runs; 0 is no entry.
type Cookies struct {
	mu    sync.Mutex
	byKey map[string]uint32
	sets  [][]Origin // cookie n is sets[n-1]
}

// NewCookies returns an empty numbering.
func NewCookies() *Cookies { return &Cookies{byKey: map[string]uint32{}} }

// Of is the cookie of a set of origins (sorted, as entries hold them).
func (c *Cookies) Of(origins []Origin) uint32 {
	if len(origins) == 0 {
		return 0
	}
	var b strings.Builder
	for _, o := range origins {
		b.WriteString(o.String())
		b.WriteByte(0)
	}
	key := b.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.byKey[key]; ok {
		return n
	}
	c.sets = append(c.sets, slices.Clone(origins))
	n := uint32(len(c.sets))
	c.byKey[key] = n
	return n
}

// Origins are the rules a cookie names; none for 0 or a cookie this
// agent did not hand out (one of an earlier run's entries).
func (c *Cookies) Origins(cookie uint32) []Origin {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cookie == 0 || int(cookie) > len(c.sets) {
		return nil
	}
	return slices.Clone(c.sets[cookie-1])
}
