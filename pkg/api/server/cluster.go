package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"

	cm "github.com/cilium/cilium/api/v1/models"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/fqdn"
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

// getFQDNCache lists the FQDN cache, of every endpoint or of {id}, with
// Cilium's filters: matchpattern (a toFQDNs pattern the name must match)
// and cidr (a prefix holding one of the addresses).
func (s *Server) getFQDNCache(w http.ResponseWriter, r *http.Request) {
	if s.p.FQDN == nil {
		writeError(w, http.StatusNotImplemented, errors.New("fqdn cache: the agent runs without the layer-7 proxy"))
		return
	}
	keep, err := fqdnFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	out := []models.DNSLookup{}
	for _, l := range s.p.FQDN.Lookups() {
		if keep(l) {
			out = append(out, l)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func fqdnFilter(r *http.Request) (func(models.DNSLookup) bool, error) {
	var ep int64 = -1
	if id := r.PathValue("id"); id != "" {
		n, err := strconv.ParseUint(id, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("endpoint id %q: %w", id, err)
		}
		ep = int64(n)
	}
	match := func(string) bool { return true }
	if p := r.URL.Query().Get("matchpattern"); p != "" {
		pat, err := fqdn.ParsePattern(p)
		if err != nil {
			return nil, fmt.Errorf("matchpattern: %w", err)
		}
		match = pat.Matches
	}
	var cidr netip.Prefix
	if c := r.URL.Query().Get("cidr"); c != "" {
		var err error
		if cidr, err = netip.ParsePrefix(c); err != nil {
			return nil, fmt.Errorf("cidr: %w", err)
		}
	}
	source := r.URL.Query().Get("source")
	return func(l models.DNSLookup) bool {
		if ep >= 0 && l.EndpointID != ep || !match(l.Fqdn) || source != "" && l.Source != source {
			return false
		}
		return !cidr.IsValid() || slices.ContainsFunc(l.Ips, func(ip string) bool {
			a, err := netip.ParseAddr(ip)
			return err == nil && cidr.Contains(a)
		})
	}, nil
}
