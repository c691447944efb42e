package agent

import (
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
)

// newNodeLister answers GET /v1/node from the watchers; no lister (the
// API answers 501) with Kubernetes off.
func newNodeLister(w *Watchers) server.NodeLister {
	if w == nil {
		return nil
	}
	return nodeLister{w}
}

type nodeLister struct{ w *Watchers }

// ListNodes is every node with an address, as the ipcache and routes see
// it: the same merge of Nodes and CiliumNodes.
func (l nodeLister) ListNodes() ([]models.Node, error) {
	out := []models.Node{}
	for _, n := range l.w.ListNodes() {
		m := models.Node{Name: n.Name, IPv4: n.IPv4.String(), Local: n.Self}
		if n.PodCIDR.IsValid() {
			m.PodCIDR = n.PodCIDR.String()
		}
		out = append(out, m)
	}
	return out, nil
}
