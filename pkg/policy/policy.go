// Package policy is network policy: NetworkPolicies and Cilium's
// policies become rules (FromNetworkPolicy, FromCNP, FromCCNP); the
// Engine turns rules, identities and local endpoints into each
// endpoint's policy map entries, changing them by delta; the entries go
// into a statedb table, and a reconciler makes the datapath's policy map
// match it.
package policy

import (
	"context"
	"errors"
	"iter"
	"strconv"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
)

// TableName is the table's name in statedb.
const TableName = "endpoint-policies"

// EndpointPolicy is a row: the whole policy of one local endpoint. Rows
// are never changed in place: a writer inserts a changed copy.
type EndpointPolicy struct {
	EndpointID uint16
	// Identity is the endpoint's identity the entries were computed for.
	Identity identity.NumericIdentity
	// Revision is the engine's revision of the entries; once the row is
	// reconciled, the endpoint's realized policy revision.
	Revision                      uint64
	EnforceIngress, EnforceEgress bool
	Entries                       []spec.PolicyEntry
	Status                        reconciler.Status
}

// TableHeader implements statedb.TableWritable.
func (*EndpointPolicy) TableHeader() []string {
	return []string{"Endpoint", "Identity", "Revision", "Enforcing", "Entries", "Status"}
}

// TableRow implements statedb.TableWritable.
func (p *EndpointPolicy) TableRow() []string {
	return []string{strconv.Itoa(int(p.EndpointID)), p.Identity.String(), strconv.FormatUint(p.Revision, 10),
		enforcing(p.EnforceIngress, p.EnforceEgress), strconv.Itoa(len(p.Entries)), p.Status.String()}
}

func enforcing(ingress, egress bool) string {
	switch {
	case ingress && egress:
		return "both"
	case ingress:
		return "ingress"
	case egress:
		return "egress"
	}
	return "none"
}

// Clone implements desired.Row.
func (p *EndpointPolicy) Clone() *EndpointPolicy {
	c := *p
	return &c
}

// GetStatus implements desired.Row.
func (p *EndpointPolicy) GetStatus() reconciler.Status { return p.Status }

// WithStatus implements desired.Row.
func (p *EndpointPolicy) WithStatus(s reconciler.Status) *EndpointPolicy {
	p.Status = s
	return p
}

// EndpointIndex is the primary index: one row per endpoint.
var EndpointIndex = statedb.Index[*EndpointPolicy, uint16]{
	Name: "endpoint",
	FromObject: func(p *EndpointPolicy) index.KeySet {
		return index.NewKeySet(index.Uint16(p.EndpointID))
	},
	FromKey:    index.Uint16,
	FromString: index.Uint16String,
	Unique:     true,
}

// NewTable creates the table and registers it with db.
func NewTable(db *statedb.DB) (statedb.RWTable[*EndpointPolicy], error) {
	return statedb.NewTable(db, TableName, EndpointIndex)
}

// Map is the datapath's policy map; *datapath.Maps is one.
type Map interface {
	// SetPolicy makes the endpoint's entries exactly entries (none: no
	// policy), or leaves them as they were and fails.
	SetPolicy(endpointID uint16, entries []spec.PolicyEntry) error
	// PolicyEndpoints lists the endpoints that hold entries.
	PolicyEndpoints() ([]uint16, error)
}

// MapSource returns the datapath's policy map, or nil while the datapath
// has not opened its maps yet.
type MapSource func() Map

// errNoMap is returned while the datapath has not opened its maps yet;
// the reconciler retries.
var errNoMap = errors.New("policy map not open yet")

// Cell provides the table (statedb.RWTable for the policy engine,
// statedb.Table for readers) and reconciles it into the map that a
// MapSource from the datapath gives.
var Cell = cell.Module("policy-map", "Endpoint policies reconciled into the policy map",
	cell.Provide(NewTable, statedb.RWTable[*EndpointPolicy].ToTable),
	health.JobGroup,
	cell.Invoke(RegisterReconciler),
)

// RegisterReconciler makes the map that source gives hold what tbl says.
func RegisterReconciler(p reconciler.Params, tbl statedb.RWTable[*EndpointPolicy], source MapSource) error {
	_, err := desired.Register(p, tbl, ops{source})
	return err
}

type ops struct{ source MapSource }

func (o ops) mapOrErr() (Map, error) {
	if m := o.source(); m != nil {
		return m, nil
	}
	return nil, errNoMap
}

// Update implements reconciler.Operations.
func (o ops) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, p *EndpointPolicy) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	return m.SetPolicy(p.EndpointID, p.Entries)
}

// Delete implements reconciler.Operations.
func (o ops) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, p *EndpointPolicy) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	return m.SetPolicy(p.EndpointID, nil)
}

// Prune implements reconciler.Operations: the policy of endpoints that no
// row names goes (left by an earlier agent, or written by hand), and every
// row's policy is written again, which SetPolicy does as a diff: entries
// changed behind the reconciler's back are repaired.
func (o ops) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*EndpointPolicy, statedb.Revision]) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	held, err := m.PolicyEndpoints()
	if err != nil {
		return err
	}
	var errs []error
	want := map[uint16]bool{}
	for p := range rows {
		want[p.EndpointID] = true
		errs = append(errs, m.SetPolicy(p.EndpointID, p.Entries))
	}
	for _, id := range held {
		if !want[id] {
			errs = append(errs, m.SetPolicy(id, nil))
		}
	}
	return errors.Join(errs...)
}
