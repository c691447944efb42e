// Package fieldmask sends only the fields of a flow that a client asked
// for (GetFlowsRequest.field_mask, the exporter's --hubble-export-fieldmask):
// a mask is checked and compiled once, into a tree of field descriptors,
// and each flow is then a path-copy of the asked fields, with no name
// lookups on the way.
package fieldmask

import (
	"fmt"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Mask is a compiled field mask of flows; the zero Mask (no paths) keeps
// whole flows.
type Mask struct {
	root *node
}

// node is one message of the tree: the fields to copy whole (leaves) and
// those to copy part of.
type node struct {
	whole []protoreflect.FieldDescriptor
	part  []branch
}

type branch struct {
	fd   protoreflect.FieldDescriptor
	next *node
}

// tree is the mask while it is built: a nil entry is a field kept whole.
type tree map[protoreflect.FieldDescriptor]tree

// MaxPaths bounds a mask, which any client may send: a flow has far
// fewer fields.
const MaxPaths = 1024

// flowDesc is what masks are paths of.
var flowDesc = (&flow.Flow{}).ProtoReflect().Descriptor()

// New compiles paths, dot-separated proto field names of flow.Flow
// ("source.pod_name", "l4.TCP.destination_port", "IP"). A path that names
// no field, or goes on past a repeated, map or scalar field, is an error
// naming it. A path under one that is kept whole adds nothing.
func New(paths []string) (Mask, error) {
	if len(paths) == 0 {
		return Mask{}, nil
	}
	if len(paths) > MaxPaths {
		return Mask{}, fmt.Errorf("field mask of %d paths: at most %d", len(paths), MaxPaths)
	}
	t := tree{}
	for _, p := range paths {
		if err := t.add(flowDesc, p); err != nil {
			return Mask{}, err
		}
	}
	return Mask{root: t.compile()}, nil
}

func (t tree) add(md protoreflect.MessageDescriptor, path string) error {
	fds, err := resolve(md, path)
	if err != nil {
		return err
	}
	cur := t
	for _, fd := range fds[:len(fds)-1] {
		sub, seen := cur[fd]
		if seen && sub == nil {
			return nil // kept whole already
		}
		if !seen {
			sub = tree{}
			cur[fd] = sub
		}
		cur = sub
	}
	cur[fds[len(fds)-1]] = nil // whole, whatever was asked under it
	return nil
}

// resolve is the fields that path names, from md down.
func resolve(md protoreflect.MessageDescriptor, path string) ([]protoreflect.FieldDescriptor, error) {
	var fds []protoreflect.FieldDescriptor
	for name := range strings.SplitSeq(path, ".") {
		if md == nil {
			last := fds[len(fds)-1]
			return nil, fmt.Errorf("field mask path %q: %s is not a message that fields can be picked from", path, last.FullName())
		}
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return nil, fmt.Errorf("field mask path %q: %s has no field %q", path, md.FullName(), name)
		}
		fds = append(fds, fd)
		md = fd.Message()
		if fd.IsList() || fd.IsMap() {
			md = nil
		}
	}
	return fds, nil
}

func (t tree) compile() *node {
	n := &node{}
	for fd, sub := range t {
		if sub == nil {
			n.whole = append(n.whole, fd)
		} else {
			n.part = append(n.part, branch{fd: fd, next: sub.compile()})
		}
	}
	return n
}

// Active says whether m keeps less than whole flows.
func (m Mask) Active() bool { return m.root != nil }

// Apply is f with only m's fields: a new flow that shares their values
// with f (neither may be changed afterwards); f itself when m is not
// active.
func (m Mask) Apply(f *flow.Flow) *flow.Flow {
	if m.root == nil || f == nil {
		return f
	}
	out := &flow.Flow{}
	m.root.copy(out.ProtoReflect(), f.ProtoReflect())
	return out
}

// copy sets in dst the fields of n that src has. Of a oneof, only the
// member that src holds is set; a message src lacks is not made.
func (n *node) copy(dst, src protoreflect.Message) {
	for _, fd := range n.whole {
		if src.Has(fd) {
			dst.Set(fd, src.Get(fd))
		}
	}
	for _, b := range n.part {
		if src.Has(b.fd) {
			b.next.copy(dst.Mutable(b.fd).Message(), src.Get(b.fd).Message())
		}
	}
}
