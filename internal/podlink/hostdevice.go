package podlink

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// ErrNotPodDevice: the device named for an endpoint is not a pod's.
var ErrNotPodDevice = errors.New("not a pod device")

// CheckPodDevice checks that name, with index ifindex in the network
// namespace at nodeNetNS ("" for the caller's), is the host side of a
// pod's device pair: a veth or netkit whose peer lives in another network
// namespace, and not loopback or any of notPod (the node's uplink, its
// tunnel device). The agent's API asks before it attaches pod programs
// and adds routes, so that a request cannot turn them onto the node's own
// devices. It reads the kernel and changes nothing.
func CheckPodDevice(nodeNetNS, name string, ifindex int, notPod ...string) error {
	if name == "lo" || slices.Contains(notPod, name) {
		return fmt.Errorf("%s is a device of the node: %w", name, ErrNotPodDevice)
	}
	h, err := netnamespace.Netlink(nodeNetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	a := link.Attrs()
	if a.Index != ifindex {
		return fmt.Errorf("%s has ifindex %d, not %d: %w", name, a.Index, ifindex, ErrNotPodDevice)
	}
	if kind := link.Type(); kind != string(DeviceVeth) && kind != string(DeviceNetkit) {
		return fmt.Errorf("%s is a %s, not a veth or netkit: %w", name, kind, ErrNotPodDevice)
	}
	// The kernel names the peer's namespace only when it differs from
	// the device's own.
	if a.NetNsID < 0 {
		return fmt.Errorf("%s has its peer in the node's namespace: %w", name, ErrNotPodDevice)
	}
	return nil
}
