package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/podlink"
)

// Names of the health endpoint's device pair, as Cilium's: lxc_health on
// the node, cilium in the endpoint's namespace.
const (
	HealthHostIfName = "lxc_health"
	HealthIfName     = "cilium"
)

// HealthLink is the health endpoint's namespace and device pair: what a
// runtime and the CNI plugin make for a pod, made by the agent for the
// one endpoint that is its own. The endpoint reconciler programs it as
// any pod's.
type HealthLink struct {
	NodeNetNS string // "" for the caller's
	NetNS     string // path of the endpoint's namespace (a bind mount)
	IPv4      netip.Addr
	MTU       int
}

// Create makes the namespace and the pair afresh: whatever an earlier
// agent left (namespace, devices) goes first.
func (h HealthLink) Create() (podlink.Result, error) {
	if err := h.Remove(); err != nil {
		return podlink.Result{}, err
	}
	remove, err := netnamespace.Create(h.NetNS)
	if err != nil {
		return podlink.Result{}, fmt.Errorf("health endpoint namespace: %w", err)
	}
	res, err := podlink.Create(podlink.Link{NodeNetNS: h.NodeNetNS, PodNetNS: h.NetNS, PodIfName: HealthIfName,
		HostIfName: HealthHostIfName, IPv4: h.IPv4, MTU: h.MTU, Device: podlink.DeviceVeth})
	if err != nil {
		return podlink.Result{}, errors.Join(fmt.Errorf("health endpoint link: %w", err), remove())
	}
	return res, nil
}

// Remove deletes the pair and the namespace; what is not there is no
// error.
func (h HealthLink) Remove() error {
	err := podlink.Delete(h.NodeNetNS, HealthHostIfName)
	if _, statErr := os.Stat(h.NetNS); statErr == nil {
		// EINVAL: the file is there but nothing is mounted on it.
		if uerr := unix.Unmount(h.NetNS, unix.MNT_DETACH); uerr != nil && !errors.Is(uerr, unix.EINVAL) {
			err = errors.Join(err, fmt.Errorf("unmount %s: %w", h.NetNS, uerr))
		}
		if rerr := os.Remove(h.NetNS); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}
