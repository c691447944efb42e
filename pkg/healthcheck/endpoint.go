package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"

	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipam"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
)

// EndpointID is the health endpoint's container id: its IPAM owner and its
// name in the endpoint manager, as the CNI's container ids are for pods.
const EndpointID = "cilium-health"

// Link is the health endpoint's namespace and device pair as the datapath
// made them.
type Link struct {
	NetNS       string
	IfName      string
	MAC         string // the endpoint side's
	HostIfName  string
	HostIfindex int
}

// Datapath is the kernel's side of health checking; the datapath cell
// provides it. Sockets open in the node's namespace, or the health
// endpoint's.
type Datapath interface {
	// Network is the prober's sockets, in the node's namespace.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	ListenICMP() (net.PacketConn, error)
	// NodeIPv4 is the address the node's responder answers on.
	NodeIPv4() netip.Addr
	// ListenNode opens a TCP listener in the node's namespace.
	ListenNode(addr string) (net.Listener, error)
	// CreateHealthLink makes the health endpoint's namespace and device
	// pair afresh, with ip on the endpoint's side.
	CreateHealthLink(ip netip.Addr) (Link, error)
	// RemoveHealthLink removes them; what is gone is no error.
	RemoveHealthLink() error
	// ListenHealth opens a TCP listener in the health endpoint's namespace.
	ListenHealth(addr string) (net.Listener, error)
}

// Endpoints is the endpoint manager as the health endpoint uses it.
type Endpoints interface {
	Create(ctx context.Context, s endpoint.Spec) (endpoint.Endpoint, bool, error)
	DeleteOwn(ctx context.Context, containerID string) (endpoint.Endpoint, error)
}

// healthEndpoint makes the node's health endpoint: an address from the
// pod CIDR, a namespace and device pair, and an endpoint with the reserved
// health identity that the endpoint manager programs as any pod's. It is
// made afresh on every start: the namespace may not have outlived the
// agent, and an endpoint restored without it would be a dangling one.
type healthEndpoint struct {
	dp   Datapath
	eps  Endpoints
	ipam *ipam.Allocator
}

// create replaces any health endpoint an earlier agent left with a new
// one, and returns it.
func (h *healthEndpoint) create(ctx context.Context) (endpoint.Endpoint, error) {
	if err := h.remove(ctx); err != nil {
		return endpoint.Endpoint{}, err
	}
	res, err := h.ipam.Allocate(EndpointID)
	if err != nil {
		return endpoint.Endpoint{}, fmt.Errorf("health endpoint address: %w", err)
	}
	link, err := h.dp.CreateHealthLink(res.IP)
	if err != nil {
		return endpoint.Endpoint{}, errors.Join(err, h.ipam.ReleaseOwner(EndpointID))
	}
	ep, _, err := h.eps.Create(ctx, endpoint.Spec{ContainerID: EndpointID, IPv4: res.IP, MAC: link.MAC,
		IfName: link.IfName, HostIfName: link.HostIfName, HostIfindex: link.HostIfindex, NetNSPath: link.NetNS,
		ReservedIdentity: identity.Health})
	if err != nil {
		return endpoint.Endpoint{}, errors.Join(fmt.Errorf("health endpoint: %w", err), h.dp.RemoveHealthLink(),
			h.ipam.ReleaseOwner(EndpointID))
	}
	return ep, nil
}

// remove deletes the health endpoint, its address and its link.
func (h *healthEndpoint) remove(ctx context.Context) error {
	_, err := h.eps.DeleteOwn(ctx, EndpointID)
	if errors.Is(err, endpoint.ErrNotFound) {
		err = nil // Delete freed the address all the same
	}
	return errors.Join(err, h.dp.RemoveHealthLink())
}

// publish writes the health endpoint's address into this node's
// CiliumNode (spec.health.ipv4), where the other nodes' probers find it.
// A merge patch touches that field alone.
func publish(ctx context.Context, c *k8sagent.Clients, node string, ip netip.Addr) error {
	v := ""
	if ip.IsValid() {
		v = ip.String()
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"health": map[string]any{"ipv4": v}}})
	if err != nil {
		return err
	}
	_, err = c.Cilium.CiliumV2().CiliumNodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	if k8serrors.IsNotFound(err) {
		if !ip.IsValid() {
			return nil // no address to take back
		}
		return fmt.Errorf("CiliumNode %s: not created yet: %w", node, err)
	}
	if err != nil {
		return fmt.Errorf("publish health address in CiliumNode %s: %w", node, err)
	}
	return nil
}
