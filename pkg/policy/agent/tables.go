package agent

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy"
)

// Table names in statedb.
const (
	TableName        = "endpoint-policies"
	EntriesTableName = "policy-entries"
)

// EndpointPolicyRow is a row of the endpoints' policies: what the engine
// computed for an endpoint, whose entries are rows of the entries table.
type EndpointPolicyRow struct {
	EndpointID uint16
	// Identity is the endpoint's identity the entries were computed for.
	Identity identity.NumericIdentity
	// Revision is the engine's revision of the endpoint's entries: the
	// policy is realized once no entry row of it at or below Revision is
	// still to be reconciled.
	Revision                      uint64
	EnforceIngress, EnforceEgress bool
	// Refused names the policy that the endpoint's map has no room for;
	// the entries are still those of Revision.
	Refused *policy.Refusal
	// L7 are the endpoint's ports that go through the layer-7 proxy,
	// with their allows: the proxy's policy.
	L7 []policy.L7Port
}

func (p *EndpointPolicyRow) clone() *EndpointPolicyRow {
	c := *p
	return &c
}

// TableHeader implements statedb.TableWritable.
func (*EndpointPolicyRow) TableHeader() []string {
	return []string{"Endpoint", "Identity", "Revision", "Enforcing", "Refused"}
}

// TableRow implements statedb.TableWritable.
func (p *EndpointPolicyRow) TableRow() []string {
	refused := ""
	if p.Refused != nil {
		refused = p.Refused.Origin.String()
	}
	return []string{strconv.Itoa(int(p.EndpointID)), p.Identity.String(), strconv.FormatUint(p.Revision, 10),
		enforcing(p.EnforceIngress, p.EnforceEgress), refused}
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

// EndpointIndex is the primary index: one row per endpoint.
var EndpointIndex = statedb.Index[*EndpointPolicyRow, uint16]{
	Name: "endpoint",
	FromObject: func(p *EndpointPolicyRow) index.KeySet {
		return index.NewKeySet(index.Uint16(p.EndpointID))
	},
	FromKey:    index.Uint16,
	FromString: index.Uint16String,
	Unique:     true,
}

// NewTable creates the endpoints' policies table.
func NewTable(db *statedb.DB) (statedb.RWTable[*EndpointPolicyRow], error) {
	return statedb.NewTable(db, TableName, EndpointIndex)
}

// PolicyEntryRow is a row of the entries table: one entry of one endpoint's
// policy, the rules it comes from, and the engine's revision that last
// wrote it. A removed entry stays as a tombstone (Deleted) until the
// reconciler removed it from the map, so that "realized" counts removals
// too; then it goes.
type PolicyEntryRow struct {
	EndpointID uint16
	Entry      spec.PolicyEntry
	Origins    []policy.Origin
	Revision   uint64
	Deleted    bool
	Status     reconciler.Status
}

// IsTombstone implements desired.Tombstone.
func (e *PolicyEntryRow) IsTombstone() bool { return e.Deleted }

func (e *PolicyEntryRow) group() spec.PolicyGroup { return e.Entry.Group(e.EndpointID) }

// TableHeader implements statedb.TableWritable.
func (*PolicyEntryRow) TableHeader() []string {
	return []string{"Endpoint", "Entry", "Origins", "Revision", "Status"}
}

// TableRow implements statedb.TableWritable.
func (e *PolicyEntryRow) TableRow() []string {
	origins := make([]string, len(e.Origins))
	for i, o := range e.Origins {
		origins[i] = o.String()
	}
	entry := e.Entry.String()
	if e.Deleted {
		entry = "(removed) " + entry
	}
	return []string{strconv.Itoa(int(e.EndpointID)), entry, strings.Join(origins, ","),
		strconv.FormatUint(e.Revision, 10), e.Status.String()}
}

// Clone implements desired.Row.
func (e *PolicyEntryRow) Clone() *PolicyEntryRow {
	c := *e
	return &c
}

// GetStatus implements desired.Row.
func (e *PolicyEntryRow) GetStatus() reconciler.Status { return e.Status }

// WithStatus implements desired.Row.
func (e *PolicyEntryRow) WithStatus(s reconciler.Status) *PolicyEntryRow {
	e.Status = s
	return e
}

// entryKey is an entry's primary key: endpoint, then the entry's fields.
func entryKey(ep uint16, e spec.PolicyEntry) index.Key {
	k := groupKey(e.Group(ep))
	k = append(k, e.Protocol)
	k = binary.BigEndian.AppendUint16(k, e.Port)
	k = binary.BigEndian.AppendUint16(k, e.EndPort)
	if e.Deny {
		k = append(k, 1)
	} else {
		k = append(k, 0)
	}
	return binary.BigEndian.AppendUint16(k, e.ProxyPort)
}

func groupKey(g spec.PolicyGroup) index.Key {
	k := binary.BigEndian.AppendUint16(nil, g.EndpointID)
	k = append(k, byte(g.Direction))
	return binary.BigEndian.AppendUint32(k, uint32(g.Identity))
}

// entryID names a row: an endpoint and one of its entries.
type entryID struct {
	ep    uint16
	entry spec.PolicyEntry
}

// EntryIndex is the entries table's primary index.
var EntryIndex = statedb.Index[*PolicyEntryRow, entryID]{
	Name: "entry",
	FromObject: func(e *PolicyEntryRow) index.KeySet {
		return index.NewKeySet(entryKey(e.EndpointID, e.Entry))
	},
	FromKey: func(id entryID) index.Key { return entryKey(id.ep, id.entry) },
	Unique:  true,
}

// GroupIndex finds the rows of a policy group.
var GroupIndex = statedb.Index[*PolicyEntryRow, spec.PolicyGroup]{
	Name: "group",
	FromObject: func(e *PolicyEntryRow) index.KeySet {
		return index.NewKeySet(groupKey(e.group()))
	},
	FromKey: groupKey,
	Unique:  false,
}

// EntryEndpointIndex finds an endpoint's rows.
var EntryEndpointIndex = statedb.Index[*PolicyEntryRow, uint16]{
	Name: "entry-endpoint",
	FromObject: func(e *PolicyEntryRow) index.KeySet {
		return index.NewKeySet(index.Uint16(e.EndpointID))
	},
	FromKey:    index.Uint16,
	FromString: index.Uint16String,
	Unique:     false,
}

// DeletedIndex finds the tombstones.
var DeletedIndex = statedb.Index[*PolicyEntryRow, bool]{
	Name: "deleted",
	FromObject: func(e *PolicyEntryRow) index.KeySet {
		return index.NewKeySet(index.Bool(e.Deleted))
	},
	FromKey: index.Bool,
	Unique:  false,
}

// NewEntriesTable creates the entries table.
func NewEntriesTable(db *statedb.DB) (statedb.RWTable[*PolicyEntryRow], error) {
	return statedb.NewTable(db, EntriesTableName, EntryIndex, GroupIndex, EntryEndpointIndex, DeletedIndex)
}
