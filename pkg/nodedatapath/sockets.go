package nodedatapath

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// sockets ends UDP sockets connected to a gone backend in every network
// namespace whose processes socket-level balancing serves: the node's and
// each local pod's.
type sockets struct {
	n   *datapath.Node
	db  *statedb.DB
	eps statedb.Table[*endpoint.EndpointRow]
	log *slog.Logger
}

func newSockets(n *datapath.Node, db *statedb.DB, eps statedb.Table[*endpoint.EndpointRow], log *slog.Logger) loadbalancer.Sockets {
	return &sockets{n: n, db: db, eps: eps, log: log}
}

// TerminateUDP implements loadbalancer.Sockets. A kernel that cannot end
// sockets from BPF is logged once per call and is no error: the sockets
// then wait for their application to give up.
func (s *sockets) TerminateUDP(backend netip.AddrPort) error {
	maps := s.n.Maps()
	if maps == nil {
		return errors.New("datapath not started")
	}
	total, err := s.n.DestroySocketsTo(backend, spec.ProtoUDP)
	errs := []error{err}
	for d := range endpoint.Live(s.db.ReadTxn(), s.eps) {
		if d.NetNSPath == "" {
			continue
		}
		n, err := maps.DestroySocketsTo(d.NetNSPath, backend, spec.ProtoUDP)
		total += n
		// A pod being deleted may have lost its namespace already.
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("endpoint %d: %w", d.ID, err))
		}
	}
	err = errors.Join(errs...)
	if errors.Is(err, datapath.ErrSockDestroyUnsupported) {
		s.log.Warn("UDP sockets connected to a gone backend stay", "backend", backend, "error", err)
		return nil
	}
	if total > 0 {
		s.log.Info("ended UDP sockets connected to a gone backend", "backend", backend, "sockets", total)
	}
	return err
}

// NetNSCookie is the kernel's cookie of the network namespace at path, by
// which socket traces (spec.EventTraceSock) name their caller's.
func NetNSCookie(path string) (uint64, error) { return datapath.NetNSCookie(path) }
