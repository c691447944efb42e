// Package clusterpool gives IPAM the pod CIDR that the operator's
// cluster-pool IPAM writes into this node's CiliumNode.
package clusterpool

import (
	"context"
	"net/netip"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
)

// Cell provides the ipam.PodCIDRSource; nil (no source) with Kubernetes
// off.
var Cell = cell.Provide(newPodCIDRSource)

func newPodCIDRSource(w *agent.Watchers) ipam.PodCIDRSource {
	if w == nil {
		return nil
	}
	return podCIDRSource{w}
}

type podCIDRSource struct{ w *agent.Watchers }

// WaitPodCIDR returns this node's pod CIDR from its CiliumNode, waiting
// for the operator to write one.
func (s podCIDRSource) WaitPodCIDR(ctx context.Context) (netip.Prefix, error) {
	nodes := desired.TableInput(s.w.Tables().CiliumNodes)
	for {
		watch := nodes.Watch(s.w.DB().ReadTxn())
		if p := s.w.OwnPodCIDR(); p.IsValid() {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return netip.Prefix{}, context.Cause(ctx)
		case <-watch:
		}
	}
}
