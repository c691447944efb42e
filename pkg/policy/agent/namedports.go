package agent

import (
	"cmp"
	"slices"

	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// namedPorts are the named ports that each CiliumEndpoint published with
// its identity, by the CiliumEndpoint's key: an identity's named ports
// are the union over the CiliumEndpoints that have it.
type namedPorts map[string]publishedPorts

type publishedPorts struct {
	id    identity.NumericIdentity
	ports policy.NamedPorts
}

// apply records a change of the CiliumEndpoint key and returns the named
// ports, as they are now, of the identities it touched: the one it had
// and the one it has. A CiliumEndpoint without an identity yet changes
// nothing.
func (n namedPorts) apply(key string, cep *v2.CiliumEndpoint, deleted bool) map[identity.NumericIdentity]policy.NamedPorts {
	old, had := n[key]
	switch {
	case deleted:
		delete(n, key)
	case cep.Status.Identity == nil:
		return nil
	default:
		n[key] = publishedPorts{id: identity.NumericIdentity(cep.Status.Identity.ID), ports: policyk8s.NamedPorts(cep.Status.NamedPorts)}
	}
	out := map[identity.NumericIdentity]policy.NamedPorts{}
	if had {
		out[old.id] = n.union(old.id)
	}
	if now, ok := n[key]; ok {
		out[now.id] = n.union(now.id)
	}
	return out
}

// union is the named ports of identity id, sorted, each once.
func (n namedPorts) union(id identity.NumericIdentity) policy.NamedPorts {
	var out policy.NamedPorts
	for _, p := range n {
		if p.id == id {
			out = append(out, p.ports...)
		}
	}
	slices.SortFunc(out, compareNamedPorts)
	return slices.Compact(out)
}

func compareNamedPorts(x, y policy.NamedPort) int {
	return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Protocol, y.Protocol), cmp.Compare(x.Port, y.Port))
}
