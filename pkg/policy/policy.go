// Package policy is network policy: NetworkPolicies and Cilium's
// policies become rules (FromNetworkPolicy, FromCNP, FromCCNP); the
// Engine turns rules, identities and local endpoints into each
// endpoint's policy map entries, changing them by delta; the entries are
// rows of a statedb table, and a reconciler makes each endpoint's policy
// map in the datapath match it, the changed policy groups (endpoint,
// direction, remote identity) of an endpoint at a time.
package policy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Table names in statedb.
const (
	TableName        = "endpoint-policies"
	EntriesTableName = "policy-entries"
)

// EndpointPolicy is a row of the endpoints' policies: what the engine
// computed for an endpoint, whose entries are rows of the entries table.
type EndpointPolicy struct {
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
	Refused *Refusal
}

func (p *EndpointPolicy) clone() *EndpointPolicy {
	c := *p
	return &c
}

// TableHeader implements statedb.TableWritable.
func (*EndpointPolicy) TableHeader() []string {
	return []string{"Endpoint", "Identity", "Revision", "Enforcing", "Refused"}
}

// TableRow implements statedb.TableWritable.
func (p *EndpointPolicy) TableRow() []string {
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
var EndpointIndex = statedb.Index[*EndpointPolicy, uint16]{
	Name: "endpoint",
	FromObject: func(p *EndpointPolicy) index.KeySet {
		return index.NewKeySet(index.Uint16(p.EndpointID))
	},
	FromKey:    index.Uint16,
	FromString: index.Uint16String,
	Unique:     true,
}

// NewTable creates the endpoints' policies table.
func NewTable(db *statedb.DB) (statedb.RWTable[*EndpointPolicy], error) {
	return statedb.NewTable(db, TableName, EndpointIndex)
}

// MapEntry is a row of the entries table: one entry of one endpoint's
// policy, the rules it comes from, and the engine's revision that last
// wrote it. A removed entry stays as a tombstone (Deleted) until the
// reconciler removed it from the map, so that "realized" counts removals
// too; then it goes.
type MapEntry struct {
	EndpointID uint16
	Entry      spec.PolicyEntry
	Origins    []Origin
	Revision   uint64
	Deleted    bool
	Status     reconciler.Status
}

func (e *MapEntry) group() spec.PolicyGroup { return e.Entry.Group(e.EndpointID) }

// TableHeader implements statedb.TableWritable.
func (*MapEntry) TableHeader() []string {
	return []string{"Endpoint", "Entry", "Origins", "Revision", "Status"}
}

// TableRow implements statedb.TableWritable.
func (e *MapEntry) TableRow() []string {
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
func (e *MapEntry) Clone() *MapEntry {
	c := *e
	return &c
}

// GetStatus implements desired.Row.
func (e *MapEntry) GetStatus() reconciler.Status { return e.Status }

// WithStatus implements desired.Row.
func (e *MapEntry) WithStatus(s reconciler.Status) *MapEntry {
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
var EntryIndex = statedb.Index[*MapEntry, entryID]{
	Name: "entry",
	FromObject: func(e *MapEntry) index.KeySet {
		return index.NewKeySet(entryKey(e.EndpointID, e.Entry))
	},
	FromKey: func(id entryID) index.Key { return entryKey(id.ep, id.entry) },
	Unique:  true,
}

// GroupIndex finds the rows of a policy group.
var GroupIndex = statedb.Index[*MapEntry, spec.PolicyGroup]{
	Name: "group",
	FromObject: func(e *MapEntry) index.KeySet {
		return index.NewKeySet(groupKey(e.group()))
	},
	FromKey: groupKey,
	Unique:  false,
}

// EntryEndpointIndex finds an endpoint's rows.
var EntryEndpointIndex = statedb.Index[*MapEntry, uint16]{
	Name: "entry-endpoint",
	FromObject: func(e *MapEntry) index.KeySet {
		return index.NewKeySet(index.Uint16(e.EndpointID))
	},
	FromKey:    index.Uint16,
	FromString: index.Uint16String,
	Unique:     false,
}

// DeletedIndex finds the tombstones.
var DeletedIndex = statedb.Index[*MapEntry, bool]{
	Name: "deleted",
	FromObject: func(e *MapEntry) index.KeySet {
		return index.NewKeySet(index.Bool(e.Deleted))
	},
	FromKey: index.Bool,
	Unique:  false,
}

// NewEntriesTable creates the entries table.
func NewEntriesTable(db *statedb.DB) (statedb.RWTable[*MapEntry], error) {
	return statedb.NewTable(db, EntriesTableName, EntryIndex, GroupIndex, EntryEndpointIndex, DeletedIndex)
}

// Map is the datapath's policy maps, one per endpoint; *datapath.Maps is
// one.
type Map interface {
	// UpdatePolicy makes the endpoint's groups named in groups hold
	// exactly their entries (none: the group goes), never leaving the
	// endpoint more open than both its old and its new policy; or
	// changes nothing and fails (datapath.ErrMapFull: its map cannot
	// hold it). narrowed reports that an allow went.
	UpdatePolicy(ep uint16, groups map[spec.PolicyGroup][]spec.PolicyEntry) (narrowed bool, err error)
	// SyncPolicy makes the maps hold exactly these groups and returns
	// the endpoints whose policy narrowed.
	SyncPolicy(groups map[spec.PolicyGroup][]spec.PolicyEntry) (narrowed []uint16, err error)
	// FlushDisallowed forgets the endpoints' established connections
	// that their policies no longer allow.
	FlushDisallowed(endpointIDs ...uint16) error
}

// MapSource returns the datapath's policy map, or nil while the datapath
// has not opened its maps yet.
type MapSource func() Map

// errNoMap is returned while the datapath has not opened its maps yet;
// the reconciler retries.
var errNoMap = errors.New("policy map not open yet")

// MapConfig sizes the endpoints' policy maps, as Cilium's flag does.
type MapConfig struct {
	// BPFPolicyMapMax is how many entries each endpoint's policy map
	// holds; a policy that needs more is refused for that endpoint.
	BPFPolicyMapMax int `mapstructure:"bpf-policy-map-max"`
}

// DefaultMapConfig is Cilium's default.
var DefaultMapConfig = MapConfig{BPFPolicyMapMax: 16384}

// Flags implements cell.Flagger.
func (def MapConfig) Flags(flags *pflag.FlagSet) {
	flags.Int("bpf-policy-map-max", def.BPFPolicyMapMax,
		"entries of each endpoint's policy map: a policy that needs more for an endpoint is refused for it, the endpoint keeping its previous policy")
}

// Validate names the flag when it is out of Cilium's range.
func (c MapConfig) Validate() error {
	if c.BPFPolicyMapMax < 1<<8 || c.BPFPolicyMapMax > 1<<16 {
		return fmt.Errorf("--bpf-policy-map-max %d: want %d to %d", c.BPFPolicyMapMax, 1<<8, 1<<16)
	}
	return nil
}

// Cell provides the tables (statedb.RWTable for the policy engine,
// statedb.Table for readers) and reconciles the entries into the maps
// that a MapSource from the datapath gives.
var Cell = cell.Module("policy-map", "Endpoint policies reconciled into the endpoints policy maps",
	cell.Config(DefaultMapConfig),
	cell.Invoke(MapConfig.Validate),
	cell.Provide(NewTable, statedb.RWTable[*EndpointPolicy].ToTable,
		NewEntriesTable, statedb.RWTable[*MapEntry].ToTable, NewCookies),
	health.JobGroup,
	cell.Invoke(RegisterReconciler),
)

// RegisterReconciler makes the maps that source gives hold what tbl
// says, and forgets the connections that narrowed policies no longer
// allow. Rows are written by the batch, an endpoint at a time: every
// group of an endpoint that a batch changes goes in one update, in the
// order that never opens the endpoint beyond its old and its new policy.
// A round takes up to roundSize rows, enough for what one policy change
// writes.
func RegisterReconciler(p reconciler.Params, jobs job.Group, tbl statedb.RWTable[*MapEntry], source MapSource, cookies *Cookies) error {
	o := &ops{tbl: tbl, source: source, cookies: cookies, flush: job.NewTrigger(), dirty: map[uint16]struct{}{}}
	jobs.Add(job.Timer("policy-flush", o.flushDirty, flushInterval, job.WithTrigger(o.flush)))
	_, err := desired.Register(p, tbl, o, desired.WithBatches[*MapEntry](o, roundSize))
	return err
}

// roundSize is how many rows a reconciliation round takes at most.
const roundSize = 1 << 16

// flushInterval retries flushes that failed; changes trigger them.
const flushInterval = time.Minute

type ops struct {
	tbl     statedb.Table[*MapEntry]
	source  MapSource
	cookies *Cookies
	flush   job.Trigger

	mu    sync.Mutex
	dirty map[uint16]struct{} // endpoints whose connections to judge again
}

func (o *ops) mapOrErr() (Map, error) {
	if m := o.source(); m != nil {
		return m, nil
	}
	return nil, errNoMap
}

// groupEntries are the live entries of a group in txn, with the cookies
// of their origins.
func (o *ops) groupEntries(txn statedb.ReadTxn, g spec.PolicyGroup) []spec.PolicyEntry {
	var out []spec.PolicyEntry
	for e := range o.tbl.List(txn, GroupIndex.Query(g)) {
		if !e.Deleted {
			out = append(out, o.withCookie(e))
		}
	}
	return out
}

func (o *ops) withCookie(e *MapEntry) spec.PolicyEntry {
	ent := e.Entry
	ent.Cookie = o.cookies.Of(e.Origins)
	return ent
}

// update writes the named groups of an endpoint as txn has them.
func (o *ops) update(txn statedb.ReadTxn, ep uint16, groups map[spec.PolicyGroup]struct{}) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	want := make(map[spec.PolicyGroup][]spec.PolicyEntry, len(groups))
	for g := range groups {
		want[g] = o.groupEntries(txn, g)
	}
	narrowed, err := m.UpdatePolicy(ep, want)
	if narrowed {
		o.markDirty(ep)
	}
	return err
}

func (o *ops) markDirty(eps ...uint16) {
	o.mu.Lock()
	for _, ep := range eps {
		o.dirty[ep] = struct{}{}
	}
	o.mu.Unlock()
	o.flush.Trigger()
}

// flushDirty forgets the connections that narrowed policies no longer
// allow, for every endpoint marked since the last time.
func (o *ops) flushDirty(context.Context) error {
	o.mu.Lock()
	eps := o.dirty
	o.dirty = map[uint16]struct{}{}
	o.mu.Unlock()
	if len(eps) == 0 {
		return nil
	}
	m, err := o.mapOrErr()
	if err == nil {
		err = m.FlushDisallowed(slices.Collect(maps.Keys(eps))...)
	}
	if err != nil {
		// Again at the next interval, not at once.
		o.mu.Lock()
		maps.Copy(o.dirty, eps)
		o.mu.Unlock()
	}
	return err
}

// UpdateBatch implements reconciler.BatchOperations: each endpoint's
// changed groups in one update, whose result is every row's.
func (o *ops) UpdateBatch(_ context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*MapEntry]) {
	byEP := map[uint16]map[spec.PolicyGroup]struct{}{}
	for _, b := range batch {
		g := b.Object.group()
		if byEP[g.EndpointID] == nil {
			byEP[g.EndpointID] = map[spec.PolicyGroup]struct{}{}
		}
		byEP[g.EndpointID][g] = struct{}{}
	}
	results := make(map[uint16]error, len(byEP))
	for ep, groups := range byEP {
		results[ep] = o.update(txn, ep, groups)
	}
	for i := range batch {
		batch[i].Result = results[batch[i].Object.EndpointID]
	}
}

// DeleteBatch implements reconciler.BatchOperations: a tombstone's entry
// left the map when the tombstone was reconciled; any other row's group
// is written again.
func (o *ops) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*MapEntry]) {
	var live []reconciler.BatchEntry[*MapEntry]
	for _, b := range batch {
		if !b.Object.Deleted {
			live = append(live, b)
		}
	}
	o.UpdateBatch(ctx, txn, live)
	for i, j := 0, 0; i < len(batch); i++ {
		if !batch[i].Object.Deleted {
			batch[i].Result = live[j].Result
			j++
		}
	}
}

// Update implements reconciler.Operations, for a row retried alone: the
// endpoint's every group is written as txn has it, so that what failed
// with the row in its batch goes in together again.
func (o *ops) Update(_ context.Context, txn statedb.ReadTxn, _ statedb.Revision, e *MapEntry) error {
	groups := map[spec.PolicyGroup]struct{}{}
	for r := range o.tbl.List(txn, EntryEndpointIndex.Query(e.EndpointID)) {
		groups[r.group()] = struct{}{}
	}
	groups[e.group()] = struct{}{}
	return o.update(txn, e.EndpointID, groups)
}

// Delete implements reconciler.Operations, as DeleteBatch.
func (o *ops) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, e *MapEntry) error {
	if e.Deleted {
		return nil
	}
	return o.Update(ctx, txn, rev, e)
}

// Prune implements reconciler.Operations: the maps are made to hold
// exactly the table's groups, whatever an earlier agent or a hand left.
func (o *ops) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*MapEntry, statedb.Revision]) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	groups := map[spec.PolicyGroup][]spec.PolicyEntry{}
	for e := range rows {
		if !e.Deleted {
			groups[e.group()] = append(groups[e.group()], o.withCookie(e))
		}
	}
	narrowed, err := m.SyncPolicy(groups)
	if len(narrowed) > 0 {
		o.markDirty(narrowed...)
	}
	return err
}
