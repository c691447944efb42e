package server

import (
	"errors"
	"net/http"

	cm "github.com/cilium/cilium/api/v1/models"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
	"github.com/cilium-go/cilium/pkg/api/models"
)

// The ipcache and the nodes come from cells the agent may run without
// (the datapath, Kubernetes): without their source the answer is 501, not
// an empty list, so that a debugging user does not read "no entries" where
// the truth is "nobody knows".

func (s *Server) getIPCache(w http.ResponseWriter, _ *http.Request) {
	if s.p.IPCache == nil {
		writeError(w, http.StatusNotImplemented, errors.New("ipcache: the agent runs without a datapath"))
		return
	}
	out, err := s.p.IPCache.ListIPCache()
	if err != nil {
		fail(w, err)
		return
	}
	if out == nil {
		out = []models.IPCacheEntry{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getService(w http.ResponseWriter, _ *http.Request) {
	out := []models.Service{}
	if s.p.Services != nil {
		out = append(out, s.p.Services.ListServices()...)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getNode(w http.ResponseWriter, _ *http.Request) {
	if s.p.Nodes == nil {
		writeError(w, http.StatusNotImplemented, errors.New("nodes: the agent runs without Kubernetes"))
		return
	}
	out, err := s.p.Nodes.ListNodes()
	if err != nil {
		fail(w, err)
		return
	}
	if out == nil {
		out = []models.Node{}
	}
	writeJSON(w, http.StatusOK, out)
}

// getClusterNodes is Cilium's GET /v1/cluster/nodes: the nodes in its
// ClusterNodeStatus model, every node added (the agent keeps no client
// ids, so each call is a whole list), named cluster/node.
func (s *Server) getClusterNodes(w http.ResponseWriter, _ *http.Request) {
	if s.p.Nodes == nil {
		writeError(w, http.StatusNotImplemented, errors.New("nodes: the agent runs without Kubernetes"))
		return
	}
	nodes, err := s.p.Nodes.ListNodes()
	if err != nil {
		fail(w, err)
		return
	}
	cluster := "default"
	if f := s.p.Flags.Lookup("cluster-name"); f != nil && f.Value.String() != "" {
		cluster = f.Value.String()
	}
	out := &cm.ClusterNodeStatus{NodesAdded: ciliumapi.Nodes(cluster, nodes), NodesRemoved: []*cm.NodeElement{}}
	for _, n := range out.NodesAdded {
		if n.Source == "local" {
			out.Self = n.Name
		}
	}
	writeJSON(w, http.StatusOK, out)
}
