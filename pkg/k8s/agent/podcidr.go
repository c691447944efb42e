package agent

import (
	"context"
	"net/netip"

	"github.com/cilium-go/cilium/pkg/ipam"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// newPodCIDRSource lets IPAM wait for the pod CIDR that the operator's
// cluster-pool IPAM writes into this node's CiliumNode; nil (no source)
// with Kubernetes off.
func newPodCIDRSource(w *Watchers) ipam.PodCIDRSource {
	if w == nil {
		return nil
	}
	return podCIDRSource{w}
}

type podCIDRSource struct{ w *Watchers }

// WaitPodCIDR returns the first IPv4 CIDR of spec.ipam.podCIDRs of this
// node's CiliumNode, waiting for the operator to write one.
func (s podCIDRSource) WaitPodCIDR(ctx context.Context) (netip.Prefix, error) {
	changes := make(chan struct{}, 1)
	stop := s.w.OnChange(func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	})
	defer stop()
	for {
		if p := s.w.ownPodCIDR(); p.IsValid() {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return netip.Prefix{}, context.Cause(ctx)
		case <-changes:
		}
	}
}

func (w *Watchers) ownPodCIDR() netip.Prefix {
	obj, ok, err := w.CiliumNodes.GetStore().GetByKey(w.NodeName)
	if err != nil || !ok {
		return netip.Prefix{}
	}
	n, ok := obj.(*v2.CiliumNode)
	if !ok {
		return netip.Prefix{}
	}
	return firstIPv4Prefix(n.Spec.IPAM.PodCIDRs)
}
