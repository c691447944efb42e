// Package endpoint manages the pods of this node as endpoints: it creates
// them when the CNI plugin asks, gives them an identity, programs the
// datapath for them, persists them in the state directory and restores
// them after an agent restart without touching their links.
package endpoint

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// ErrNotFound: no endpoint by that name.
var ErrNotFound = errors.New("endpoint not found")

// ErrConflict: the container already has an endpoint that differs.
var ErrConflict = errors.New("endpoint exists with different parameters")

// Endpoint is one local pod as the agent knows it. It is also the format
// of the state file, so fields only get added.
type Endpoint struct {
	ID           uint16     `json:"id"`
	ContainerID  string     `json:"containerID"`
	PodName      string     `json:"podName,omitempty"`
	PodNamespace string     `json:"podNamespace,omitempty"`
	IPv4         netip.Addr `json:"ipv4"`
	// MAC is the pod's own interface address.
	MAC string `json:"mac"`
	// IfName is the pod-side name, e.g. eth0.
	IfName      string                   `json:"ifName"`
	HostIfName  string                   `json:"hostIfName"`
	HostIfindex int                      `json:"hostIfindex"`
	NetNSPath   string                   `json:"netnsPath"`
	Identity    identity.NumericIdentity `json:"identity"`
	// ReservedIdentity, when set, is the endpoint's identity for good,
	// instead of one from its pod's labels: the health endpoint's.
	ReservedIdentity identity.NumericIdentity `json:"reservedIdentity,omitempty"`
	Created          time.Time                `json:"created"`
}

// Spec is what the CNI plugin knows when it asks for an endpoint.
type Spec struct {
	ContainerID  string
	PodName      string
	PodNamespace string
	IPv4         netip.Addr
	MAC          string
	IfName       string
	HostIfName   string
	HostIfindex  int
	NetNSPath    string
	// ReservedIdentity gives the endpoint this reserved identity instead
	// of its pod's: the agent's own endpoints (health) have no pod.
	ReservedIdentity identity.NumericIdentity
}

// Validate names the first bad field.
func (s Spec) Validate() error {
	switch {
	case s.ContainerID == "":
		return errors.New("containerID: required")
	case strings.ContainsAny(s.ContainerID, "/\x00"):
		return errors.New("containerID: must not contain '/'")
	case !s.IPv4.Is4():
		return errors.New("ipv4: an IPv4 address is required")
	case s.HostIfName == "" || len(s.HostIfName) > 15:
		return errors.New("hostIfName: 1 to 15 characters required")
	case s.HostIfindex <= 0:
		return errors.New("hostIfindex: must be positive")
	case s.NetNSPath == "":
		return errors.New("netnsPath: required")
	case s.ReservedIdentity != 0 && !s.ReservedIdentity.IsReserved():
		return fmt.Errorf("reservedIdentity: %d is not a reserved identity", s.ReservedIdentity)
	}
	if _, err := net.ParseMAC(s.MAC); err != nil {
		return fmt.Errorf("mac: %w", err)
	}
	return nil
}

func (e *Endpoint) spec() Spec {
	return Spec{ContainerID: e.ContainerID, PodName: e.PodName, PodNamespace: e.PodNamespace,
		IPv4: e.IPv4, MAC: e.MAC, IfName: e.IfName, HostIfName: e.HostIfName,
		HostIfindex: e.HostIfindex, NetNSPath: e.NetNSPath, ReservedIdentity: e.ReservedIdentity}
}

// datapathEndpoint is the endpoint as the datapath programs it.
func (d *EndpointRow) datapathEndpoint() spec.Endpoint {
	mac, _ := net.ParseMAC(d.MAC) // validated on creation
	return spec.Endpoint{ID: d.ID, Identity: d.Identity, IPv4: d.IPv4, MAC: mac, HostDevice: d.HostIfName,
		PolicyIngress: d.EnforcePolicy, PolicyEgress: d.EnforcePolicy}
}
