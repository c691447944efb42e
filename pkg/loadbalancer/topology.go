package loadbalancer

import "slices"

// topology narrows a port's backends to those near the node, for the
// clients of a Cluster traffic policy. As in kube-proxy, the endpoints'
// hints alone decide it: a Service's trafficDistribution (PreferSameNode,
// PreferSameZone, PreferClose) and its service.kubernetes.io/topology-mode
// annotation (Auto) reach the node only as the hints that
// kube-controller-manager's EndpointSlice controller writes for them, and
// hints written by anyone else count the same.
type topology uint8

const (
	// anywhere: every ready endpoint serves.
	anywhere topology = iota
	// sameNode: the ready endpoints hinted for the node.
	sameNode
	// sameZone: the ready endpoints hinted for the node's zone.
	sameZone
)

// topologyOf picks the topology from the ready candidates' hints, falling
// back from the node to the zone to anywhere:
//   - sameNode when every one of them has node hints and one names this
//     node;
//   - else sameZone when every one has zone hints and one names the
//     node's zone;
//   - else anywhere: an endpoint without hints, a node whose zone (or
//     whose lack of a zone label) no hint names, no ready endpoint.
//
// A topology is thus only chosen with a ready endpoint in it, and
// endpoints that are not ready (terminating ones among them) neither
// need hints nor count as near.
func topologyOf(cs []candidate, local Local) topology {
	ready := false
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, c := range cs {
		if !c.ready {
			continue
		}
		ready = true
		if len(c.forNodes) == 0 {
			allNode = false
		} else if slices.Contains(c.forNodes, local.NodeName) {
			forNode = true
		}
		if len(c.forZones) == 0 {
			allZone = false
		} else if slices.Contains(c.forZones, local.Zone) {
			forZone = true
		}
	}
	switch {
	case !ready:
		return anywhere
	case allNode && forNode:
		return sameNode
	case allZone && forZone:
		return sameZone
	}
	return anywhere
}

// admits says whether c is near enough under t.
func (t topology) admits(c candidate, local Local) bool {
	switch t {
	case sameNode:
		return slices.Contains(c.forNodes, local.NodeName)
	case sameZone:
		return slices.Contains(c.forZones, local.Zone)
	}
	return true
}

// clusterBackends are a Cluster traffic policy's backends: the ready
// candidates the topology admits, or when none is ready, those serving
// while they terminate, wherever they are (the topology falls back to
// anywhere before it would leave ready endpoints out altogether).
func clusterBackends(cs []candidate, local Local) []Backend {
	t := topologyOf(cs, local)
	return usable(filter(cs, func(c candidate) bool { return !c.ready || t.admits(c, local) }))
}
