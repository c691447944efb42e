package agent

import (
	"errors"
	"log/slog"
	"net/netip"

	"github.com/cilium-go/cilium/internal/datapath"
)

// RemoteNodeDatapath routes other nodes' pod CIDRs; *datapath.Node is one.
type RemoteNodeDatapath interface {
	UpsertRemoteNode(datapath.RemoteNode) error
	DeleteRemoteNode(datapath.RemoteNode) error
}

// ipcacheSync hands the desired ipcache to its reconciler and keeps the
// routes to remote nodes' pod CIDRs.
type ipcacheSync struct {
	rec    *datapath.Reconciler[netip.Prefix, datapath.IPCacheEntry]
	routes RemoteNodeDatapath
	// routed is what the last sync routed, to remove what went away.
	routed map[datapath.RemoteNode]bool
}

func newIPCacheSync(log *slog.Logger, target datapath.Target[netip.Prefix, datapath.IPCacheEntry], routes RemoteNodeDatapath) *ipcacheSync {
	return &ipcacheSync{
		rec:    datapath.NewReconciler("ipcache", target, log),
		routes: routes,
		routed: map[datapath.RemoteNode]bool{},
	}
}

func (s *ipcacheSync) sync(c Cluster) error {
	s.rec.Replace(DesiredIPCache(c))
	want := map[datapath.RemoteNode]bool{}
	var errs []error
	for _, r := range RemoteNodes(c) {
		want[r] = true
	}
	// Remove first: a node that moved keeps its pod CIDR, and the route
	// to it is deleted by destination.
	for r := range s.routed {
		if want[r] {
			continue
		}
		if err := s.routes.DeleteRemoteNode(r); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(s.routed, r)
	}
	for _, r := range RemoteNodes(c) {
		if s.routed[r] {
			continue
		}
		if err := s.routes.UpsertRemoteNode(r); err != nil {
			errs = append(errs, err)
			continue
		}
		s.routed[r] = true
	}
	return errors.Join(errs...)
}
