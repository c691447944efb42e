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

// allocateIdentity is e's identity: its reserved one, or its pod's.
func (m *Manager) allocateIdentity(ctx context.Context, e *Endpoint) (identity.NumericIdentity, error) {
	if e.ReservedIdentity != 0 {
		return e.ReservedIdentity, nil
	}
	return m.ids.Allocate(ctx, e.pod())
}

// releaseIdentity gives back what allocateIdentity took; a reserved
// identity is nobody's to release.
func (m *Manager) releaseIdentity(ctx context.Context, e *Endpoint) error {
	if e.ReservedIdentity != 0 {
		return nil
	}
	return m.ids.Release(ctx, e.pod(), e.Identity)
}
