package endpoint

import (
	"context"

	"github.com/cilium-go/cilium/pkg/identity"
)

// Pod names the pod behind an endpoint.
type Pod struct {
	Namespace, Name string
}

// IdentityAllocator gives an endpoint its security identity. The manager
// calls it on creation and restore, and Release on deletion; the
// label-based allocator (pkg/identity, with labels from the pod) plugs in
// here by providing this interface instead of InitIdentityAllocator.
type IdentityAllocator interface {
	Allocate(ctx context.Context, pod Pod) (identity.NumericIdentity, error)
	Release(ctx context.Context, pod Pod, id identity.NumericIdentity) error
}

// InitIdentityAllocator gives every endpoint the init identity: without label
// resolution, that is the truth about every pod.
type InitIdentityAllocator struct{}

// NewInitIdentityAllocator is the allocator the agent uses until label
// resolution exists.
func NewInitIdentityAllocator() IdentityAllocator { return InitIdentityAllocator{} }

// Allocate implements IdentityAllocator.
func (InitIdentityAllocator) Allocate(context.Context, Pod) (identity.NumericIdentity, error) {
	return identity.Init, nil
}

// Release implements IdentityAllocator.
func (InitIdentityAllocator) Release(context.Context, Pod, identity.NumericIdentity) error {
	return nil
}
