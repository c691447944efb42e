package policy

import (
	"maps"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// EntryChange is an entry of an endpoint's policy that appeared,
// changed its origins, or went (Origins empty). A deleted endpoint's
// entries all go, with no change for each.
type EntryChange struct {
	EndpointID uint16
	Entry      spec.PolicyEntry
	Origins    []Origin
}

// EndpointStatus is the engine's view of an endpoint after a change.
type EndpointStatus struct {
	ID       uint16
	Identity identity.NumericIdentity
	// Revision counts the engine's changes; the endpoint's entries are
	// those of this revision.
	Revision uint64
	// Ready: the endpoint's identity is known and its entries computed.
	Ready                         bool
	EnforceIngress, EnforceEgress bool
	Deleted                       bool
	// Refused is set while the endpoint's policy does not fit its map:
	// no entry changes come, and the endpoint keeps its policy of before.
	Refused *Refusal
	// Resync: the policy fits again, and the changes are all its entries;
	// every other entry the tables hold for it goes.
	Resync bool
	// L7 are the endpoint's ports that go through the layer-7 proxy,
	// with their allows: what the proxy judges by.
	L7 []L7Port
}

// Flush returns what changed since the last Flush: the endpoints whose
// policy changed, and their entries that did.
// An endpoint that overflowed is computed again from scratch: refused
// before, what changed may have made room; overflowed since the last
// Flush, it may have been on the way to a policy that fits (a rule
// replaced adds its new entries before its old ones go). Its tables hold
// its policy of before, so if it fits they are resynced.
func (e *Engine) Flush() ([]EndpointStatus, []EntryChange) {
	// CIDR identities that nothing needs go first: an endpoint computed
	// again must not count their entries (the world's selector selects
	// every CIDR identity).
	e.collectCIDRs()
	for id := range e.dirtyEps {
		if ep, ok := e.eps[id]; ok && ep.overflow != nil {
			if ep.refused == nil {
				ep.refused = ep.overflow
			}
			e.rebuild(ep)
		}
	}
	if len(e.dirtyEps) == 0 {
		return nil, nil
	}
	e.revision++
	var eps []EndpointStatus
	var changes []EntryChange
	for _, id := range slices.Sorted(maps.Keys(e.dirtyEps)) {
		ep, ok := e.eps[id]
		changed := maps.Keys(e.dirtyEntries[id])
		switch {
		case !ok:
			// Every entry it had goes (the writer's tombstones).
			eps = append(eps, EndpointStatus{ID: id, Revision: e.revision, Deleted: true})
			continue
		case ep.overflow != nil:
			ep.refused = ep.overflow
			eps = append(eps, ep.status())
			continue
		default:
			ep.revision = e.revision
			st := ep.status()
			st.L7 = e.l7Ports(ep)
			if st.Resync = ep.refused != nil; st.Resync {
				ep.refused = nil
				changed = maps.Keys(ep.entries)
			}
			eps = append(eps, st)
		}
		for ent := range changed {
			changes = append(changes, EntryChange{EndpointID: id, Entry: ent, Origins: sortedOrigins(ep.entries[ent])})
		}
	}
	clear(e.dirtyEps)
	clear(e.dirtyEntries)
	return eps, changes
}

func (ep *epState) status() EndpointStatus {
	return EndpointStatus{ID: ep.info.ID, Identity: ep.info.Identity, Revision: ep.revision, Ready: ep.ready,
		EnforceIngress: ep.enforce[spec.Ingress], EnforceEgress: ep.enforce[spec.Egress], Refused: ep.overflow}
}

func sortedOrigins(m map[Origin]int) []Origin {
	if len(m) == 0 {
		return nil
	}
	return slices.SortedFunc(maps.Keys(m), compareOrigins)
}

// Entries returns an endpoint's entries and the origins of each.
func (e *Engine) Entries(id uint16) map[spec.PolicyEntry][]Origin {
	ep, ok := e.eps[id]
	if !ok {
		return nil
	}
	out := make(map[spec.PolicyEntry][]Origin, len(ep.entries))
	for ent, o := range ep.entries {
		out[ent] = sortedOrigins(o)
	}
	return out
}

// Endpoint returns the engine's view of an endpoint.
func (e *Engine) Endpoint(id uint16) (EndpointStatus, bool) {
	ep, ok := e.eps[id]
	if !ok {
		return EndpointStatus{}, false
	}
	return ep.status(), true
}
