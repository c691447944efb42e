package endpoint

import (
	"context"

	"github.com/cilium/hive/cell"
)

// InitIdentity is the reserved identity of an endpoint whose labels are
// not known yet.
const InitIdentity uint32 = 5

// Pod names the pod behind an endpoint.
type Pod struct {
	Namespace, Name string
}

// IdentityAllocator gives an endpoint its security identity. The manager
// calls it on creation and restore, and Release on deletion; the
// label-based allocator (pkg/identity, with labels from the pod) plugs in
// here by providing this interface instead of InitIdentityAllocator.
type IdentityAllocator interface {
	Allocate(ctx context.Context, pod Pod) (uint32, error)
	Release(ctx context.Context, pod Pod, id uint32) error
}

// InitIdentityAllocator gives every endpoint InitIdentity: without label
// resolution, that is the truth about every pod.
type InitIdentityAllocator struct{}

// NewInitIdentityAllocator is the allocator the agent uses until label
// resolution exists.
func NewInitIdentityAllocator() IdentityAllocator { return InitIdentityAllocator{} }

// Allocate implements IdentityAllocator.
func (InitIdentityAllocator) Allocate(context.Context, Pod) (uint32, error) {
	return InitIdentity, nil
}

// Release implements IdentityAllocator.
func (InitIdentityAllocator) Release(context.Context, Pod, uint32) error { return nil }

// InitIdentityCell provides InitIdentityAllocator. The agent lists it in
// its cells until the label-based identity cell takes its place.
var InitIdentityCell = cell.Module("identity-init", "Every endpoint gets the init identity",
	cell.Provide(NewInitIdentityAllocator),
)
