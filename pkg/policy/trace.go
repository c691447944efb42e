package policy

import (
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Verdict is what policy says about a new connection, and why.
type Verdict struct {
	Allowed bool
	// Enforced: the endpoint is isolated in the direction asked about.
	Enforced bool
	// DecidedBy are the rules' origins that decided: the denies that
	// matched, else the allows that matched; none when nothing matched
	// and the connection is dropped by default.
	DecidedBy []Origin
}

// Trace judges a connection of an endpoint with identity subject (and
// named ports own) with a peer of identity remote, in direction dir, to
// protocol proto and port (the ICMP type for ICMP). It runs the code that
// computes the endpoints' entries, so it says what the datapath does.
func (e *Engine) Trace(subject *Identity, own NamedPorts, dir spec.Direction, remote *Identity, proto uint8, port uint16) Verdict {
	specs, enforce := e.filtersFor(subject)
	denied, allowed := map[Origin]int{}, map[Origin]int{}
	for _, fs := range specs {
		if fs.dir != dir {
			continue
		}
		id := remote.ID
		if _, wild := fs.sel.(Wildcard); wild {
			id = identity.Unknown
		} else if !fs.sel.Selects(remote) {
			continue
		}
		for _, ent := range e.entriesFor(fs, id, own) {
			if !entryMatches(ent, proto, port) {
				continue
			}
			if ent.Deny {
				denied[fs.origin]++
			} else {
				allowed[fs.origin]++
			}
		}
	}
	v := Verdict{Enforced: enforce[dir]}
	switch {
	case len(denied) > 0:
		v.DecidedBy = sortedOrigins(denied)
	case len(allowed) > 0:
		v.Allowed, v.DecidedBy = true, sortedOrigins(allowed)
	}
	return v
}

// entryMatches reports whether ent covers a packet to proto and port.
func entryMatches(ent spec.PolicyEntry, proto uint8, port uint16) bool {
	if ent.Protocol != 0 && ent.Protocol != proto {
		return false
	}
	return ent.Port == 0 || (port >= ent.Port && port <= max(ent.Port, ent.EndPort))
}
