// Package clusterpool gives IPAM the pod CIDR that the operator's
// cluster-pool IPAM writes into this node's CiliumNode.
package clusterpool

import (
	"context"
	"net/netip"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/node"
)

// Cell provides the ipam.PodCIDRSource; nil (no source) with Kubernetes
// off.
var Cell = cell.Provide(newPodCIDRSource)

func newPodCIDRSource(c *node.Cluster) ipam.PodCIDRSource {
	if c == nil {
		return nil
	}
	return podCIDRSource{c}
}

type podCIDRSource struct{ c *node.Cluster }

// WaitPodCIDR returns this node's pod CIDR from its CiliumNode, waiting
// for the operator to write one.
func (s podCIDRSource) WaitPodCIDR(ctx context.Context) (netip.Prefix, error) {
	for {
		txn := s.c.DB.ReadTxn()
		_, watch := s.c.CiliumNodes.AllWatch(txn)
		if p := s.c.OwnPodCIDR(txn); p.IsValid() {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return netip.Prefix{}, context.Cause(ctx)
		case <-watch:
		}
	}
}
