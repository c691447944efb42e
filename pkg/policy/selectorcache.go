package policy

import (
	"github.com/cilium-go/cilium/pkg/identity"
)

// selectorCache keeps, for every selector in use, the identities it
// selects. An identity that comes or goes is checked against each
// selector once, and the selectors that change say so to their users:
// the work of an identity change grows with the selectors, not with the
// identities already known.
type selectorCache struct {
	ids  map[identity.NumericIdentity]*Identity
	sels map[string]*cachedSelector
}

// cachedSelector is a selector, the identities it selects, and the
// endpoint filters that use it.
type cachedSelector struct {
	sel   Selector
	ids   map[identity.NumericIdentity]struct{}
	users map[*filter]*epState
}

func newSelectorCache() *selectorCache {
	c := &selectorCache{ids: map[identity.NumericIdentity]*Identity{}, sels: map[string]*cachedSelector{}}
	// The wildcard's one member: entries with identity 0 match any peer.
	c.ids[identity.Unknown] = &Identity{ID: identity.Unknown}
	return c
}

// acquire returns the cached form of s, computing its identities the
// first time it is used.
func (c *selectorCache) acquire(s Selector) *cachedSelector {
	key := s.Key()
	if cs, ok := c.sels[key]; ok {
		return cs
	}
	cs := &cachedSelector{sel: s, ids: map[identity.NumericIdentity]struct{}{}, users: map[*filter]*epState{}}
	for id, ident := range c.ids {
		if s.Selects(ident) {
			cs.ids[id] = struct{}{}
		}
	}
	c.sels[key] = cs
	return cs
}

// release forgets cs, which no filter uses any more.
func (c *selectorCache) release(cs *cachedSelector) {
	delete(c.sels, cs.sel.Key())
}

// upsert adds or replaces an identity and returns the selectors that now
// select it and did not, and those that did and no longer do.
func (c *selectorCache) upsert(id *Identity) (added, removed []*cachedSelector) {
	c.ids[id.ID] = id
	for _, cs := range c.sels {
		_, had := cs.ids[id.ID]
		switch has := cs.sel.Selects(id); {
		case has && !had:
			cs.ids[id.ID] = struct{}{}
			added = append(added, cs)
		case had && !has:
			delete(cs.ids, id.ID)
			removed = append(removed, cs)
		}
	}
	return added, removed
}

// remove forgets an identity and returns the selectors that selected it.
func (c *selectorCache) remove(num identity.NumericIdentity) (removed []*cachedSelector) {
	if num == identity.Unknown {
		return nil
	}
	delete(c.ids, num)
	for _, cs := range c.sels {
		if _, had := cs.ids[num]; had {
			delete(cs.ids, num)
			removed = append(removed, cs)
		}
	}
	return removed
}
