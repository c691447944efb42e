package policy

import (
	"slices"

	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// entityIdentities are the entities that stand for one reserved identity.
var entityIdentities = map[api.Entity]identity.NumericIdentity{
	api.EntityHost:          identity.Host,
	api.EntityRemoteNode:    identity.RemoteNode,
	api.EntityKubeAPIServer: identity.KubeAPIServer,
	api.EntityHealth:        identity.Health,
	api.EntityInit:          identity.Init,
	api.EntityUnmanaged:     identity.Unmanaged,
	api.EntityIngress:       identity.Ingress,
}

// EntitySelector is the selector of a Cilium entity; nil for those that
// select nothing here ("none", and "world-ipv6" in an IPv4-only
// cluster).
func EntitySelector(e api.Entity) Selector {
	switch e {
	case api.EntityAll:
		return Wildcard{}
	case api.EntityWorld, api.EntityWorldIPv4:
		return worldSelector{}
	case api.EntityCluster:
		return clusterSelector{}
	}
	if id, ok := entityIdentities[e]; ok {
		return IdentitySet{Name: "entity:" + string(e), IDs: []identity.NumericIdentity{id}}
	}
	return nil
}

// worldSelector selects what is outside the cluster: the world identities
// and the CIDR identities of prefixes, but not those that pods' and nodes'
// addresses carry.
type worldSelector struct{}

func (worldSelector) Key() string { return "entity:world" }

func (worldSelector) Selects(id *Identity) bool {
	if id.Prefix.IsValid() {
		return !id.InCluster
	}
	return id.ID == identity.World || id.ID == identity.WorldIPv4
}

// clusterIdentities are the reserved identities inside the cluster.
var clusterIdentities = []identity.NumericIdentity{
	identity.Host, identity.RemoteNode, identity.Init, identity.Health,
	identity.Unmanaged, identity.KubeAPIServer, identity.Ingress,
}

// clusterSelector selects every endpoint of the cluster: the pods'
// identities and the reserved identities of what runs in it.
type clusterSelector struct{}

func (clusterSelector) Key() string { return "entity:cluster" }

func (clusterSelector) Selects(id *Identity) bool {
	return id.ID.IsCluster() || slices.Contains(clusterIdentities, id.ID)
}
