package datapath

import (
	"fmt"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// PodMTU is the MTU pods of this node should use: the uplink's, less
// the VXLAN header in tunnel mode. Valid after Start.
func (n *Node) PodMTU() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nl == nil {
		return 0, fmt.Errorf("pod MTU: %w", ErrNotStarted)
	}
	l, err := n.nl.LinkByName(n.cfg.Uplink)
	if err != nil {
		return 0, fmt.Errorf("uplink %s: %w", n.cfg.Uplink, err)
	}
	mtu := l.Attrs().MTU
	if n.cfg.Mode == spec.Tunnel {
		mtu -= vxlanOverhead
	}
	return mtu, nil
}
