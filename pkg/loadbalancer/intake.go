package loadbalancer

import (
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/desired"
)

// Intake is where the controller reads services: tables whose rows
// touch services (a Service, the EndpointSlices of one, a pod that maps
// hostPorts), and how a service reads out of them. pkg/loadbalancer/k8s
// makes it from the Kubernetes tables. The controller follows the
// tables' changes itself; nobody calls it back.
type Intake struct {
	// Inputs are the tables; the controller starts once every one is
	// initialized.
	Inputs []Input
	// Service reads a service and its endpoints as of txn; false when
	// there is none.
	Service func(txn statedb.ReadTxn, n ServiceName) (Service, []Endpoint, bool)
	// NodeName is this node's name, which endpoints name their node by.
	NodeName string
	// Zone reads this node's zone (Local.Zone) as of txn, from a table
	// among Inputs; nil: the node has none. When it changes, every
	// service is written again, as topology hints choose by it.
	Zone func(txn statedb.ReadTxn) string
}

// Input is a table whose rows touch services.
type Input interface {
	// input is the table as the controller's input.
	input() desired.Input
	// follow starts following the table's changes.
	follow(db *statedb.DB) (touches, error)
}

// touches tells which services a table's changes touch.
type touches interface {
	// next returns the services that the changes since the last call
	// touch, as of txn.
	next(txn statedb.ReadTxn) []ServiceName
}

// TableInput is t as an Input: key names a row across its changes, and
// touch is the service a row touches, false for none.
func TableInput[T any](t statedb.Table[T], key func(T) string, touch func(T) (ServiceName, bool)) Input {
	return tableInput[T]{t: t, key: key, touch: touch}
}

type tableInput[T any] struct {
	t     statedb.Table[T]
	key   func(T) string
	touch func(T) (ServiceName, bool)
}

func (in tableInput[T]) input() desired.Input { return desired.TableInput(in.t) }

func (in tableInput[T]) follow(db *statedb.DB) (touches, error) {
	f, err := desired.Follow(db, in.t)
	if err != nil {
		return nil, err
	}
	return &tableTouches[T]{in: in, f: f, last: map[string]ServiceName{}}, nil
}

// tableTouches maps a table's changes to services. A change does not
// carry the row it replaced, so the service each row touched when last
// seen is kept: a row that moves to another service, or stops touching
// one, touches the one it left too.
type tableTouches[T any] struct {
	in   tableInput[T]
	f    *desired.Follower[T]
	last map[string]ServiceName
}

func (tt *tableTouches[T]) next(txn statedb.ReadTxn) []ServiceName {
	var out []ServiceName
	tt.f.Next(txn, func(obj T, deleted bool) {
		k := tt.in.key(obj)
		if old, ok := tt.last[k]; ok {
			out = append(out, old)
			delete(tt.last, k)
		}
		if deleted {
			return
		}
		if n, ok := tt.in.touch(obj); ok {
			tt.last[k] = n
			out = append(out, n)
		}
	})
	return out
}
