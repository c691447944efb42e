package loadbalancer

import (
	"encoding/binary"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Table names in statedb.
const (
	ServicesTableName  = "services"
	FrontendsTableName = "frontends"
	BackendsTableName  = "backends"
)

// ServiceRow is a Service the load balancer knows, ours or not.
type ServiceRow struct {
	Service
	// LocalReady is the number of the node's ready endpoints of the
	// service (see LocalReady), which its healthCheckNodePort reports.
	LocalReady int
	// ReadyNodes are the nodes with a ready endpoint of the service.
	ReadyNodes []string
}

// TableHeader implements statedb.TableWritable.
func (*ServiceRow) TableHeader() []string {
	return []string{"Name", "Type", "ClusterIPs", "Ports", "Ours"}
}

// TableRow implements statedb.TableWritable.
func (r *ServiceRow) TableRow() []string {
	var ips, ports []string
	for _, ip := range r.ClusterIPs {
		ips = append(ips, ip.String())
	}
	for _, p := range r.Ports {
		ports = append(ports, p.String())
	}
	return []string{r.Name.String(), string(r.Type), orDash(strings.Join(ips, ",")), orDash(strings.Join(ports, ",")),
		strconv.FormatBool(Ours(r.Service))}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ServiceNameIndex is the services table's primary index.
var ServiceNameIndex = statedb.Index[*ServiceRow, string]{
	Name:       "name",
	FromObject: func(r *ServiceRow) index.KeySet { return index.NewKeySet(index.String(r.Name.String())) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// FrontendRow is a frontend as the datapath holds it: the Frontend with
// the numbers the datapath names its backends and its replies by.
type FrontendRow struct {
	Frontend
	RevNATIndex uint16
	// SlotIDs and InternalSlotIDs are Slots and InternalSlots by id.
	SlotIDs         []spec.BackendID
	InternalSlotIDs []spec.BackendID
	// Backends are every backend of the frontend, written before the
	// slots that name them.
	BackendSpecs []spec.Backend
	Status       reconciler.Status
}

// Services are the entries the datapath holds for the row: the external
// scope and, with two scopes, the internal one.
func (r *FrontendRow) Services() []spec.Service {
	f := spec.Frontend{Address: r.Address, Port: r.Port, Protocol: r.Protocol}
	ext := spec.Service{Frontend: f, Backends: r.SlotIDs, RevNATIndex: r.RevNATIndex, Flags: r.Flags,
		AffinityTimeout: r.AffinityTimeout}
	if r.Flags&spec.LBTwoScopes == 0 {
		return []spec.Service{ext}
	}
	f.Scope = spec.ScopeInternal
	in := spec.Service{Frontend: f, Backends: r.InternalSlotIDs, RevNATIndex: r.RevNATIndex,
		Flags: r.Flags &^ (spec.LBTwoScopes | spec.LBLocal | spec.LBMaglev), AffinityTimeout: r.AffinityTimeout}
	return []spec.Service{in, ext}
}

// backendsOf are the row's backends of ids.
func (r *FrontendRow) backendsOf(ids []spec.BackendID) []spec.Backend {
	byID := make(map[spec.BackendID]spec.Backend, len(r.BackendSpecs))
	for _, b := range r.BackendSpecs {
		byID[b.ID] = b
	}
	out := make([]spec.Backend, 0, len(ids))
	for _, id := range ids {
		out = append(out, byID[id])
	}
	return out
}

// sameAs says whether two rows want the same of the datapath.
func (r *FrontendRow) sameAs(o *FrontendRow) bool {
	return r.Addr == o.Addr && r.Service == o.Service && r.PortName == o.PortName && r.Flags == o.Flags &&
		r.AffinityTimeout == o.AffinityTimeout && r.RevNATIndex == o.RevNATIndex &&
		slices.Equal(r.SlotIDs, o.SlotIDs) && slices.Equal(r.InternalSlotIDs, o.InternalSlotIDs) &&
		slices.Equal(r.BackendSpecs, o.BackendSpecs) && slices.Equal(r.SourceRanges, o.SourceRanges)
}

// TableHeader implements statedb.TableWritable.
func (*FrontendRow) TableHeader() []string {
	return []string{"Frontend", "Type", "Service", "Slots", "InternalSlots", "RevNAT", "Status"}
}

// TableRow implements statedb.TableWritable.
func (r *FrontendRow) TableRow() []string {
	ids := func(s []spec.BackendID) string {
		var out []string
		for _, id := range s {
			out = append(out, strconv.FormatUint(uint64(id), 10))
		}
		return strings.Join(out, ",")
	}
	in := ids(r.InternalSlotIDs)
	if r.Flags&spec.LBTwoScopes == 0 {
		in = "-"
	}
	return []string{r.Addr.String(), r.Kind(), r.Service.String() + ":" + r.PortName, ids(r.SlotIDs), in,
		strconv.Itoa(int(r.RevNATIndex)), r.Status.String()}
}

// Clone implements desired.Row.
func (r *FrontendRow) Clone() *FrontendRow {
	c := *r
	return &c
}

// GetStatus implements desired.Row.
func (r *FrontendRow) GetStatus() reconciler.Status { return r.Status }

// WithStatus implements desired.Row.
func (r *FrontendRow) WithStatus(s reconciler.Status) *FrontendRow {
	r.Status = s
	return r
}

// addrKey orders frontends by address, port and protocol.
func addrKey(a Addr) index.Key {
	b := a.Address.As4()
	k := make([]byte, 0, 7)
	k = append(k, b[:]...)
	k = binary.BigEndian.AppendUint16(k, a.Port)
	return append(k, a.Protocol)
}

// FrontendAddrIndex is the frontends table's primary index.
var FrontendAddrIndex = statedb.Index[*FrontendRow, Addr]{
	Name:       "addr",
	FromObject: func(r *FrontendRow) index.KeySet { return index.NewKeySet(addrKey(r.Addr)) },
	FromKey:    addrKey,
	Unique:     true,
}

// FrontendServiceIndex finds a service's frontends.
var FrontendServiceIndex = statedb.Index[*FrontendRow, ServiceName]{
	Name:       "service",
	FromObject: func(r *FrontendRow) index.KeySet { return index.NewKeySet(index.String(r.Service.String())) },
	FromKey:    func(n ServiceName) index.Key { return index.String(n.String()) },
	FromString: index.FromString,
}

// FrontendRevNATIndex finds the frontend with a reverse NAT index, the
// one the datapath's events name.
var FrontendRevNATIndex = statedb.Index[*FrontendRow, uint16]{
	Name:       "revnat",
	FromObject: func(r *FrontendRow) index.KeySet { return index.NewKeySet(index.Uint16(r.RevNATIndex)) },
	FromKey:    index.Uint16,
}

// BackendRow is a backend as the datapath holds it.
type BackendRow struct {
	spec.Backend
	Status reconciler.Status
}

// TableHeader implements statedb.TableWritable.
func (*BackendRow) TableHeader() []string { return []string{"ID", "Backend", "State", "Status"} }

// TableRow implements statedb.TableWritable.
func (r *BackendRow) TableRow() []string {
	state := "active"
	if r.Terminating {
		state = "terminating"
	}
	a := Addr{Address: r.Address, Port: r.Port, Protocol: r.Protocol}
	return []string{strconv.FormatUint(uint64(r.ID), 10), a.String(), state, r.Status.String()}
}

// Clone implements desired.Row.
func (r *BackendRow) Clone() *BackendRow {
	c := *r
	return &c
}

// GetStatus implements desired.Row.
func (r *BackendRow) GetStatus() reconciler.Status { return r.Status }

// WithStatus implements desired.Row.
func (r *BackendRow) WithStatus(s reconciler.Status) *BackendRow {
	r.Status = s
	return r
}

// BackendIDIndex is the backends table's primary index.
var BackendIDIndex = statedb.Index[*BackendRow, spec.BackendID]{
	Name:       "id",
	FromObject: func(r *BackendRow) index.KeySet { return index.NewKeySet(index.Uint32(uint32(r.ID))) },
	FromKey:    func(id spec.BackendID) index.Key { return index.Uint32(uint32(id)) },
	FromString: index.Uint32String,
	Unique:     true,
}

// Tables are the load balancer's tables.
type Tables struct {
	Services  statedb.RWTable[*ServiceRow]
	Frontends statedb.RWTable[*FrontendRow]
	Backends  statedb.RWTable[*BackendRow]
}

// NewTables creates the tables and registers them with db.
func NewTables(db *statedb.DB) (Tables, error) {
	var t Tables
	var err error
	if t.Services, err = statedb.NewTable(db, ServicesTableName, ServiceNameIndex); err != nil {
		return t, err
	}
	if t.Frontends, err = statedb.NewTable(db, FrontendsTableName, FrontendAddrIndex, FrontendServiceIndex, FrontendRevNATIndex); err != nil {
		return t, err
	}
	t.Backends, err = statedb.NewTable(db, BackendsTableName, BackendIDIndex)
	return t, err
}
