package endpoint

import (
	"iter"
	"strconv"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"
)

// TableName is the endpoints table's name in statedb.
const TableName = "endpoints"

// EndpointRow is an endpoint as the datapath should hold it: the row of the
// endpoints table, which the endpoint reconciler programs into the kernel.
// Rows are never changed in place: the manager inserts a changed copy.
type EndpointRow struct {
	Endpoint
	// EnforcePolicy makes the endpoint's programs judge new connections
	// by its policy map, in both directions. Where no rule isolates the
	// endpoint, the policy engine writes an allow-all entry.
	EnforcePolicy bool
	// Deleted makes the row a tombstone: the endpoint is gone, and the
	// row stays until the reconciler unprogrammed it (see
	// desired.CollectTombstones), its id taken meanwhile. Readers of the
	// table skip tombstones (see Live).
	Deleted bool
	Status  reconciler.Status
}

// IsTombstone implements desired.Tombstone.
func (d *EndpointRow) IsTombstone() bool { return d.Deleted }

// TableHeader implements statedb.TableWritable.
func (*EndpointRow) TableHeader() []string {
	return []string{"ID", "Container", "Pod", "IPv4", "Identity", "Device", "Status"}
}

// TableRow implements statedb.TableWritable.
func (d *EndpointRow) TableRow() []string {
	pod := ""
	if d.PodName != "" {
		pod = d.PodNamespace + "/" + d.PodName
	}
	status := d.Status.String()
	if d.Deleted {
		status = "(removed) " + status
	}
	return []string{strconv.Itoa(int(d.ID)), d.ContainerID, pod, d.IPv4.String(), d.Identity.String(),
		d.HostIfName, status}
}

// Clone implements desired.Row.
func (d *EndpointRow) Clone() *EndpointRow {
	c := *d
	return &c
}

// GetStatus implements desired.Row.
func (d *EndpointRow) GetStatus() reconciler.Status { return d.Status }

// WithStatus implements desired.Row.
func (d *EndpointRow) WithStatus(s reconciler.Status) *EndpointRow {
	d.Status = s
	return d
}

// IDIndex is the primary index: one row per endpoint id.
var IDIndex = statedb.Index[*EndpointRow, uint16]{
	Name: "id",
	FromObject: func(d *EndpointRow) index.KeySet {
		return index.NewKeySet(index.Uint16(d.ID))
	},
	FromKey:    index.Uint16,
	FromString: index.Uint16String,
	Unique:     true,
}

// TombstoneIndex finds the tombstones.
var TombstoneIndex = statedb.Index[*EndpointRow, bool]{
	Name: "tombstone",
	FromObject: func(d *EndpointRow) index.KeySet {
		return index.NewKeySet(index.Bool(d.Deleted))
	},
	FromKey:    index.Bool,
	FromString: index.BoolString,
}

// NewTable creates the endpoints table and registers it with db.
func NewTable(db *statedb.DB) (statedb.RWTable[*EndpointRow], error) {
	return statedb.NewTable(db, TableName, IDIndex, TombstoneIndex)
}

// Gone tells whether a change of the table ends an endpoint: the row
// deleted, or turned into a tombstone.
func Gone(e *EndpointRow, deleted bool) bool { return deleted || e.Deleted }

// Live are the endpoints of the table as of txn, tombstones left out.
func Live(txn statedb.ReadTxn, eps statedb.Table[*EndpointRow]) iter.Seq[*EndpointRow] {
	return statedb.ToSeq(eps.List(txn, TombstoneIndex.Query(false)))
}

var _ statedb.TableWritable = (*EndpointRow)(nil)
