// Package identity maps security label sets to numeric identities, the numbers
// the datapath carries in packets and policy maps. Reserved identities have fixed
// numbers; cluster identities are allocated through CiliumIdentity objects so
// every node agrees on them (pkg/identity/allocator). This package is
// only numbers and labels, so the datapath's values can carry them.
package identity

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cilium-go/cilium/pkg/labels"
)

// NumericIdentity is a security identity number.
type NumericIdentity uint32

// Reserved identities, with Cilium's numbers.
const (
	Unknown       NumericIdentity = 0
	Host          NumericIdentity = 1
	World         NumericIdentity = 2
	Unmanaged     NumericIdentity = 3
	Health        NumericIdentity = 4
	Init          NumericIdentity = 5
	RemoteNode    NumericIdentity = 6
	KubeAPIServer NumericIdentity = 7
	Ingress       NumericIdentity = 8
	WorldIPv4     NumericIdentity = 9
	WorldIPv6     NumericIdentity = 10
)

// The range of cluster-wide identities allocated through CiliumIdentity objects.
const (
	MinClusterIdentity NumericIdentity = 256
	MaxClusterIdentity NumericIdentity = 65535
	// LocalIdentityFlag marks node-local identities (CIDR identities); they are
	// never written to the API server.
	LocalIdentityFlag NumericIdentity = 1 << 24
)

var reservedNames = map[NumericIdentity]string{
	Host:          "host",
	World:         "world",
	Unmanaged:     "unmanaged",
	Health:        "health",
	Init:          "init",
	RemoteNode:    "remote-node",
	KubeAPIServer: "kube-apiserver",
	Ingress:       "ingress",
	WorldIPv4:     "world-ipv4",
	WorldIPv6:     "world-ipv6",
}

var reservedByName = func() map[string]NumericIdentity {
	m := make(map[string]NumericIdentity, len(reservedNames))
	for id, n := range reservedNames {
		m[n] = id
	}
	return m
}()

// ReservedName returns the name of a reserved identity ("host").
func (id NumericIdentity) ReservedName() (string, bool) {
	n, ok := reservedNames[id]
	return n, ok
}

// IsReserved reports whether id is one of the fixed reserved identities.
func (id NumericIdentity) IsReserved() bool {
	_, ok := reservedNames[id]
	return ok
}

// IsCluster reports whether id is in the cluster-wide allocation range.
func (id NumericIdentity) IsCluster() bool {
	return id >= MinClusterIdentity && id <= MaxClusterIdentity
}

// String is the decimal number, which is also the CiliumIdentity object name.
func (id NumericIdentity) String() string { return strconv.FormatUint(uint64(id), 10) }

// ParseNumeric reads a decimal identity number (a CiliumIdentity name).
func ParseNumeric(s string) (NumericIdentity, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("identity %q: %w", s, err)
	}
	return NumericIdentity(n), nil
}

// LookupReservedName returns the reserved identity named name ("world").
func LookupReservedName(name string) (NumericIdentity, bool) {
	id, ok := reservedByName[name]
	return id, ok
}

// IdentityAllocator is what the agent needs from an allocator; the
// CiliumIdentity-backed Allocator implements it, a kvstore one can later.
type IdentityAllocator interface {
	Allocate(ctx context.Context, ls labels.Labels) (id *Identity, isNew bool, err error)
	Release(id *Identity) (last bool)
	Lookup(ctx context.Context, num NumericIdentity) (*Identity, error)
}

// Identity is a number and the security labels it stands for.
type Identity struct {
	ID     NumericIdentity
	Labels labels.Labels
}

// ReservedIdentity returns the reserved identity id with its reserved label.
func ReservedIdentity(id NumericIdentity) (*Identity, bool) {
	n, ok := reservedNames[id]
	if !ok {
		return nil, false
	}
	return &Identity{ID: id, Labels: labels.Reserved(n)}, true
}

// ReservedFor returns the reserved identity a label set maps to without
// allocation: exactly one reserved label, or reserved:init with anything.
func ReservedFor(ls labels.Labels) (*Identity, bool) {
	if name, ok := ls.ReservedName(); ok {
		if id, ok := reservedByName[name]; ok {
			return &Identity{ID: id, Labels: ls}, true
		}
	}
	if l, ok := ls["init"]; ok && l.Source == labels.SourceReserved {
		return &Identity{ID: Init, Labels: labels.Reserved("init")}, true
	}
	return nil, false
}
