package api

// Entity names a class of remote peers that is not a pod selector: the world,
// the cluster, the node the endpoint runs on, and so on.
type Entity string

// Entities Cilium defines.
const (
	EntityAll           Entity = "all"
	EntityWorld         Entity = "world"
	EntityWorldIPv4     Entity = "world-ipv4"
	EntityWorldIPv6     Entity = "world-ipv6"
	EntityCluster       Entity = "cluster"
	EntityHost          Entity = "host"
	EntityRemoteNode    Entity = "remote-node"
	EntityKubeAPIServer Entity = "kube-apiserver"
	EntityInit          Entity = "init"
	EntityIngress       Entity = "ingress"
	EntityHealth        Entity = "health"
	EntityUnmanaged     Entity = "unmanaged"
	EntityNone          Entity = "none"
)

// Entities lists every valid entity, in the order the CRD schema enumerates them.
var Entities = []Entity{
	EntityAll, EntityWorld, EntityCluster, EntityHost, EntityInit, EntityIngress,
	EntityUnmanaged, EntityRemoteNode, EntityHealth, EntityNone, EntityKubeAPIServer,
	EntityWorldIPv4, EntityWorldIPv6,
}
