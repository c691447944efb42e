package policy

import (
	"maps"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// EntryChange is an entry of an endpoint's policy that appeared,
// changed its origins, or went (Origins empty).
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
}

// Flush returns what changed since the last Flush: the endpoints whose
// policy changed, and their entries that did.
func (e *Engine) Flush() ([]EndpointStatus, []EntryChange) {
	e.collectCIDRs()
	if len(e.dirtyEps) == 0 {
		return nil, nil
	}
	e.revision++
	var eps []EndpointStatus
	var changes []EntryChange
	for _, id := range slices.Sorted(maps.Keys(e.dirtyEps)) {
		ep, ok := e.eps[id]
		if !ok {
			eps = append(eps, EndpointStatus{ID: id, Revision: e.revision, Deleted: true})
		} else {
			ep.revision = e.revision
			eps = append(eps, ep.status())
		}
		for ent := range e.dirtyEntries[id] {
			c := EntryChange{EndpointID: id, Entry: ent}
			if ok {
				c.Origins = sortedOrigins(ep.entries[ent])
			}
			changes = append(changes, c)
		}
	}
	clear(e.dirtyEps)
	clear(e.dirtyEntries)
	return eps, changes
}

func (ep *epState) status() EndpointStatus {
	return EndpointStatus{ID: ep.info.ID, Identity: ep.info.Identity, Revision: ep.revision, Ready: ep.ready,
		EnforceIngress: ep.enforce[spec.Ingress], EnforceEgress: ep.enforce[spec.Egress]}
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
