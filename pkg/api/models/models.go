// Package models holds the JSON bodies of the agent's REST API, as
// described by api/v1/openapi.yaml. The agent's server and pkg/api/client
// share them; the package depends only on value packages (identities, the
// datapath's values) so that small clients (the CNI plugin) stay small.
package models

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// ContainerIDPrefix names an endpoint by its container in the API
// (GET /v1/endpoint/container-id:<id>).
const ContainerIDPrefix = "container-id:"

// Error is every error response.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// ModuleHealth is one module's last report.
type ModuleHealth struct {
	Module  string    `json:"module"`
	Level   string    `json:"level"`
	Message string    `json:"message,omitempty"`
	Error   string    `json:"error,omitempty"`
	Since   time.Time `json:"since"`
}

// Health is GET /v1/healthz.
type Health struct {
	// OK is false when any module is degraded.
	OK      bool           `json:"ok"`
	Modules []ModuleHealth `json:"modules"`
}

// Config is GET /v1/config: the flags the agent runs with, and the
// options that PATCH can change while it runs.
type Config struct {
	Flags   map[string]string `json:"flags"`
	Options map[string]string `json:"options"`
	// PodMTU is the MTU pod interfaces should have; 0 when unknown.
	PodMTU int `json:"podMTU,omitempty"`
	// PodDevice is the kind of device pair pods get (--datapath-mode):
	// "veth" or "netkit"; empty from an agent that predates it (veth).
	PodDevice string `json:"podDevice,omitempty"`
}

// ConfigPatch is the body of PATCH /v1/config.
type ConfigPatch struct {
	Options map[string]string `json:"options"`
}

// IPAMRequest is the body of POST /v1/ipam.
type IPAMRequest struct {
	// Owner is the container the address is for; one owner, one address.
	Owner string `json:"owner"`
}

// Validate names the bad field.
func (r IPAMRequest) Validate() error {
	if r.Owner == "" {
		return errors.New("owner: required")
	}
	return nil
}

// IPAMResponse is an allocated pod address.
type IPAMResponse struct {
	Address string `json:"address"`
	Gateway string `json:"gateway"`
	PodCIDR string `json:"podCIDR"`
}

// IPAMAllocation is one handed-out pod address and its owner, as GET
// /v1/ipam lists them.
type IPAMAllocation struct {
	IP    string `json:"ip"`
	Owner string `json:"owner"`
}

// EndpointRequest is the body of PUT /v1/endpoint/{id}.
type EndpointRequest struct {
	ContainerID  string `json:"containerID"`
	PodName      string `json:"podName,omitempty"`
	PodNamespace string `json:"podNamespace,omitempty"`
	IPv4         string `json:"ipv4"`
	MAC          string `json:"mac"`
	IfName       string `json:"ifName"`
	HostIfName   string `json:"hostIfName"`
	HostIfindex  int    `json:"hostIfindex"`
	NetNSPath    string `json:"netnsPath"`
}

// Endpoint is a local pod's endpoint.
type Endpoint struct {
	ID           uint16                   `json:"id"`
	ContainerID  string                   `json:"containerID"`
	PodName      string                   `json:"podName,omitempty"`
	PodNamespace string                   `json:"podNamespace,omitempty"`
	IPv4         string                   `json:"ipv4"`
	MAC          string                   `json:"mac"`
	IfName       string                   `json:"ifName"`
	HostIfName   string                   `json:"hostIfName"`
	HostIfindex  int                      `json:"hostIfindex"`
	NetNSPath    string                   `json:"netnsPath"`
	Identity     identity.NumericIdentity `json:"identity"`
	// Labels are the identity's security labels, where the agent knows
	// them.
	Labels  []string  `json:"labels"`
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	// Policy is the endpoint's policy, in GET /v1/endpoint/{id} only and
	// only once the policy engine knows the endpoint.
	Policy *EndpointPolicy `json:"policy,omitempty"`
}

// Identity is a security identity in use on this node.
type Identity struct {
	ID        identity.NumericIdentity `json:"id"`
	Labels    []string                 `json:"labels"`
	Endpoints int                      `json:"endpoints"`
}

// BPFMap is one of the node's pinned maps.
type BPFMap struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	Type       string `json:"type"`
	MaxEntries uint32 `json:"maxEntries"`
	// Entries is -1 where the map cannot be counted (ring buffers).
	Entries int `json:"entries"`
}

// Service is one frontend the agent balances: what a client connects to
// and the backends that serve it.
type Service struct {
	Frontend string `json:"frontend"` // address:port/protocol
	// Type is ClusterIP, NodePort, ExternalIP, HostPort or LoadBalancer.
	Type    string `json:"type"`
	Service string `json:"service"` // namespace/name
	Port    string `json:"port,omitempty"`
	// Backends serve every client, or with internal backends the
	// clients from outside the node.
	Backends         []ServiceBackend `json:"backends"`
	InternalBackends []ServiceBackend `json:"internalBackends,omitempty"`
	// SessionAffinityTimeout is ClientIP affinity's, in seconds; 0: none.
	SessionAffinityTimeout uint32 `json:"sessionAffinityTimeout,omitempty"`
	ExternalTrafficPolicy  string `json:"externalTrafficPolicy"`
	InternalTrafficPolicy  string `json:"internalTrafficPolicy"`
	// Status is the datapath's: Done once the maps hold it, else
	// Pending or the error of the last try.
	Status string `json:"status"`
}

// ServiceBackend is one backend of a frontend.
type ServiceBackend struct {
	Address string `json:"address"` // address:port
	// State is active (new connections come), terminating (in the slots
	// only because nothing else serves) or draining (no new connections;
	// those it has go on).
	State    string `json:"state"`
	NodeName string `json:"nodeName,omitempty"`
}

// IPCacheEntry is one prefix of the node's ipcache: the identity of the
// addresses in it and, for pods behind a tunnel, the node hosting them.
type IPCacheEntry struct {
	Prefix         string                   `json:"prefix"`
	Identity       identity.NumericIdentity `json:"identity"`
	TunnelEndpoint string                   `json:"tunnelEndpoint,omitempty"`
	// CIDRIdentity is the ipBlock prefix's identity of a pod's or node's
	// address, judged beside Identity.
	CIDRIdentity identity.NumericIdentity `json:"cidrIdentity,omitempty"`
}

// Node is a node of the cluster as the agent knows it.
type Node struct {
	Name string `json:"name"`
	IPv4 string `json:"ipv4"`
	// PodCIDR is empty until the node has one.
	PodCIDR string `json:"podCIDR,omitempty"`
	// Local is the agent's own node.
	Local bool `json:"local"`
}

// IPCacheEntries converts the datapath's ipcache entries for the API, sorted by address
// and then prefix length so that lists compare and read well.
func IPCacheEntries(entries map[netip.Prefix]spec.IPCacheEntry) []IPCacheEntry {
	prefixes := make([]netip.Prefix, 0, len(entries))
	for p := range entries {
		prefixes = append(prefixes, p)
	}
	slices.SortFunc(prefixes, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	out := make([]IPCacheEntry, 0, len(prefixes))
	for _, p := range prefixes {
		e := entries[p]
		m := IPCacheEntry{Prefix: p.String(), Identity: e.Identity, CIDRIdentity: e.CIDRIdentity}
		if e.TunnelEndpoint.IsValid() {
			m.TunnelEndpoint = e.TunnelEndpoint.String()
		}
		out = append(out, m)
	}
	return out
}

// MonitorEvent is one datapath event as GET /v1/monitor streams it, a
// line of JSON each.
type MonitorEvent struct {
	Type        string                   `json:"type"`
	Reason      string                   `json:"reason,omitempty"`
	ReasonCode  uint8                    `json:"reasonCode,omitempty"`
	Point       string                   `json:"point,omitempty"`
	Verdict     string                   `json:"verdict,omitempty"`
	Direction   string                   `json:"direction,omitempty"`
	CT          string                   `json:"ct,omitempty"`
	Protocol    string                   `json:"protocol"`
	Src         string                   `json:"src"`
	SrcPort     uint16                   `json:"srcPort"`
	Dst         string                   `json:"dst"`
	DstPort     uint16                   `json:"dstPort"`
	SrcIdentity identity.NumericIdentity `json:"srcIdentity"`
	DstIdentity identity.NumericIdentity `json:"dstIdentity"`
	SrcEndpoint uint16                   `json:"srcEndpoint,omitempty"`
	DstEndpoint uint16                   `json:"dstEndpoint,omitempty"`
	Ifindex     uint32                   `json:"ifindex"`
	Length      uint32                   `json:"length"`
	// Lost, on a record of its own (Type "lost"), is how many events the
	// agent dropped for this reader since the last such record: a reader
	// slower than the datapath loses events, and is told so.
	Lost uint64 `json:"lost,omitempty"`
}

// MonitorEventTypes are the types GET /v1/monitor's type parameter takes.
var MonitorEventTypes = []string{"drop", "trace", "policy-verdict"}

// DNSLookup is what an endpoint learned of a name from allowed DNS
// answers (toFQDNs), Cilium's model of GET /fqdn/cache: the addresses of
// one lookup, or, with source "connection", those kept past their TTL
// for the connections that still use them.
type DNSLookup struct {
	Fqdn           string   `json:"fqdn"`
	Ips            []string `json:"ips"`
	TTL            int64    `json:"ttl"`
	LookupTime     string   `json:"lookup-time"`
	ExpirationTime string   `json:"expiration-time"`
	EndpointID     int64    `json:"endpoint-id"`
	Source         string   `json:"source"`
}
