package loadbalancer

import (
	"net/netip"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
)

// lister answers GET /v1/service from the tables: every frontend with
// its backends and whether the datapath holds it yet.
type lister struct {
	db     *statedb.DB
	tables Tables
}

func newLister(db *statedb.DB, t Tables) server.ServiceLister { return lister{db: db, tables: t} }

// ListServices implements server.ServiceLister.
func (l lister) ListServices() []models.Service {
	txn := l.db.ReadTxn()
	out := []models.Service{}
	for r := range l.tables.Frontends.All(txn) {
		svc, _, _ := l.tables.Services.Get(txn, ServiceNameIndex.Query(r.Service.String()))
		m := models.Service{Frontend: r.Addr.String(), Type: r.Kind(), Service: r.Service.String(), Port: r.PortName,
			SessionAffinityTimeout: r.AffinityTimeout, ExternalTrafficPolicy: "Cluster", InternalTrafficPolicy: "Cluster",
			Status: r.Status.String()}
		if svc != nil && svc.ExternalLocal {
			m.ExternalTrafficPolicy = "Local"
		}
		if svc != nil && svc.InternalLocal {
			m.InternalTrafficPolicy = "Local"
		}
		m.Backends = backendModels(r.Slots, r.Backends)
		if r.InternalSlots != nil {
			m.InternalBackends = backendModels(r.InternalSlots, r.Backends)
		}
		out = append(out, m)
	}
	return out
}

// backendModels lists the slots' backends, then the frontend's other
// backends, which only finish the connections they have.
func backendModels(slots, all []Backend) []models.ServiceBackend {
	out := []models.ServiceBackend{}
	inSlot := map[Addr]bool{}
	for _, b := range slots {
		inSlot[b.Addr] = true
		state := "active"
		if b.Terminating {
			state = "terminating"
		}
		out = append(out, backendModel(b, state))
	}
	for _, b := range all {
		if !inSlot[b.Addr] && b.Terminating {
			out = append(out, backendModel(b, "draining"))
		}
	}
	return out
}

func backendModel(b Backend, state string) models.ServiceBackend {
	return models.ServiceBackend{Address: netip.AddrPortFrom(b.Address, b.Port).String(), State: state, NodeName: b.NodeName}
}
