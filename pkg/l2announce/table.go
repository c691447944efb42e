package l2announce

import (
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// TableName is the l2-announcements table's name in statedb.
const TableName = "l2-announcements"

// Announcement is an address this node answers ARP for on a device,
// because it holds the Lease of the Services that have it.
type Announcement struct {
	Entry
	Ifindex  uint32
	MAC      net.HardwareAddr
	Services []loadbalancer.ServiceName
	Status   reconciler.Status
}

// Clone implements desired.Row.
func (a *Announcement) Clone() *Announcement { c := *a; return &c }

// GetStatus implements desired.Row.
func (a *Announcement) GetStatus() reconciler.Status { return a.Status }

// WithStatus implements desired.Row.
func (a *Announcement) WithStatus(s reconciler.Status) *Announcement { a.Status = s; return a }

// same says whether two rows want the same of the datapath and name the
// same Services.
func (a *Announcement) same(b *Announcement) bool {
	return a.Entry == b.Entry && a.Ifindex == b.Ifindex && slices.Equal(a.MAC, b.MAC) &&
		slices.Equal(a.Services, b.Services)
}

// TableHeader implements statedb.TableWritable.
func (*Announcement) TableHeader() []string {
	return []string{"Address", "Device", "Ifindex", "MAC", "Services", "Status"}
}

// TableRow implements statedb.TableWritable.
func (a *Announcement) TableRow() []string {
	var svcs []string
	for _, s := range a.Services {
		svcs = append(svcs, s.String())
	}
	return []string{a.Address.String(), a.Device, strconv.FormatUint(uint64(a.Ifindex), 10), a.MAC.String(),
		strings.Join(svcs, ","), a.Status.String()}
}

// EntryIndex is the table's primary index: address@device.
var EntryIndex = statedb.Index[*Announcement, string]{
	Name:       "entry",
	FromObject: func(a *Announcement) index.KeySet { return index.NewKeySet(index.String(a.Entry.String())) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// NewTable creates the table and registers it with db.
func NewTable(db *statedb.DB) (statedb.RWTable[*Announcement], error) {
	return statedb.NewTable(db, TableName, EntryIndex)
}
