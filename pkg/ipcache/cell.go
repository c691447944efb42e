package ipcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/node"
)

// Cell computes the desired ipcache and the remote nodes to route to from
// the local endpoints, the Nodes, CiliumNodes and CiliumEndpoints of the
// Kubernetes tables (none in tests without them: then the ipcache holds
// the local endpoints alone) and the prefixes that policy rules name. It
// follows each input's changes and recomputes only the entries they
// touch. It writes them into their tables, whose reconcilers make the
// datapath's ipcache map and routes match.
var Cell = cell.Module("ipcache", "The ipcache and remote node routes",
	TableCell,
	node.TableCell,
	health.JobGroup,
	cell.Invoke(register),
)

type params struct {
	cell.In
	Log         *slog.Logger
	Jobs        job.Group
	Map         MapSource
	Routes      node.Routes
	Endpoints   statedb.Table[*endpoint.EndpointRow]
	Table       statedb.RWTable[*EntryRow]
	RemoteNodes statedb.RWTable[*node.RouteRow]
	Reconciler  reconciler.Params

	K8sNodes        statedb.Table[*corev1.Node]       `optional:"true"`
	CiliumNodes     statedb.Table[*v2.CiliumNode]     `optional:"true"`
	CiliumEndpoints statedb.Table[*v2.CiliumEndpoint] `optional:"true"`
	// K8s names this node among the Nodes: nil with Kubernetes off.
	K8s *tables.Clients `optional:"true"`
	// Prefixes are the prefixes that policy rules name: none without
	// the policy engine.
	Prefixes statedb.Table[*PolicyPrefixRow] `optional:"true"`
}

func register(p params) error {
	// The writers register before the reconcilers start, so that these
	// prune nothing until the first sync wrote the tables.
	s, err := newClusterSync(p)
	if err != nil {
		return err
	}
	if _, err := RegisterReconciler(p.Reconciler, p.Table, p.Map); err != nil {
		return err
	}
	if err := node.RegisterReconciler(p.Reconciler, p.RemoteNodes, p.Routes); err != nil {
		return err
	}
	desired.Controller(p.Jobs, "ipcache", p.Reconciler.DB, s.inputs(), func(_ context.Context, txn statedb.ReadTxn) error {
		st, err := s.round(txn)
		if err == nil {
			p.Log.Debug("ipcache updated", "computed", st.computed, "changed", st.changed, "deleted", st.deleted)
		}
		return err
	})
	return nil
}

// clusterSync keeps the ipcache and the remote nodes in step with their
// inputs: it reads each input table's changes into a clusterIndex, and
// writes the entries of the prefixes that these touched.
type clusterSync struct {
	self    string // this node's name
	ipcache *Writer
	nodes   *node.Writer
	x       *clusterIndex
	// nodesChanged: the remote nodes are to be written again (from the
	// start, so that the first round initializes their table).
	nodesChanged bool

	endpoints       *desired.Follower[*endpoint.EndpointRow]
	k8sNodes        *desired.Follower[*corev1.Node]
	ciliumNodes     *desired.Follower[*v2.CiliumNode]
	ciliumEndpoints *desired.Follower[*v2.CiliumEndpoint]
	prefixes        *desired.Follower[*PolicyPrefixRow]
}

// newClusterSync starts following the inputs' changes: what happens
// between now and the first round is in that round.
func newClusterSync(p params) (*clusterSync, error) {
	db := p.Reconciler.DB
	s := &clusterSync{ipcache: NewWriter(db, p.Table), nodes: node.NewWriter(db, p.RemoteNodes),
		x: newClusterIndex(), nodesChanged: true}
	if p.K8s != nil {
		s.self = p.K8s.NodeName
	}
	var errs [5]error
	s.endpoints, errs[0] = desired.Follow(db, p.Endpoints)
	s.k8sNodes, errs[1] = desired.Follow(db, p.K8sNodes)
	s.ciliumNodes, errs[2] = desired.Follow(db, p.CiliumNodes)
	s.ciliumEndpoints, errs[3] = desired.Follow(db, p.CiliumEndpoints)
	s.prefixes, errs[4] = desired.Follow(db, p.Prefixes)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return s, nil
}

// inputs are the tables the sync follows. The prefixes are initialized
// once the policy engine wrote them first, so that the first entries
// carry the CIDR identities that the policy maps name.
func (s *clusterSync) inputs() []desired.Input {
	return desired.Inputs(s.endpoints, s.k8sNodes, s.ciliumNodes, s.ciliumEndpoints, s.prefixes)
}

// roundStats say what a round did: how many entries it computed, and
// how many of those it wrote or deleted.
type roundStats struct {
	computed, changed, deleted int
}

// round reads the inputs' changes up to txn and writes the entries they
// touched, and the remote nodes when a node changed. What it could not
// write is written by the next round.
func (s *clusterSync) round(txn statedb.ReadTxn) (roundStats, error) {
	s.endpoints.Next(txn, func(d *endpoint.EndpointRow, deleted bool) {
		s.x.setLocal(d.ID, localEndpoint{IPv4: d.IPv4, Identity: d.Identity}, !deleted && d.IPv4.Is4())
	})
	names := map[string]struct{}{}
	s.k8sNodes.Next(txn, func(n *corev1.Node, _ bool) { names[n.Name] = struct{}{} })
	s.ciliumNodes.Next(txn, func(n *v2.CiliumNode, _ bool) { names[n.Name] = struct{}{} })
	for name := range names {
		n, ok := s.node(txn, name)
		if s.x.setNode(name, n, ok) {
			s.nodesChanged = true
		}
	}
	s.ciliumEndpoints.Next(txn, func(cep *v2.CiliumEndpoint, deleted bool) {
		ep, ok := RemoteEndpointOf(cep)
		s.x.setRemote(tables.Key(cep), ep, ok && !deleted)
	})
	s.prefixes.Next(txn, func(p *PolicyPrefixRow, deleted bool) {
		s.x.setPrefix(p.Key(), p.Identity, !deleted)
	})
	return s.write()
}

// node is the node name as its Node and CiliumNode tell it, as of txn;
// ok is false when neither gives it an IPv4 address.
func (s *clusterSync) node(txn statedb.ReadTxn, name string) (node.Node, bool) {
	var (
		nodes       []*corev1.Node
		ciliumNodes []*v2.CiliumNode
	)
	if s.k8sNodes != nil {
		if n, ok := tables.Get(txn, s.k8sNodes.Table(), name); ok {
			nodes = append(nodes, n)
		}
	}
	if s.ciliumNodes != nil {
		if n, ok := tables.Get(txn, s.ciliumNodes.Table(), name); ok {
			ciliumNodes = append(ciliumNodes, n)
		}
	}
	merged := node.Merge(s.self, nodes, ciliumNodes)
	if len(merged) == 0 {
		return node.Node{}, false
	}
	return merged[0], true
}

// write computes the dirty entries and writes them, then the remote
// nodes if they changed. The dirty entries stay dirty until written.
func (s *clusterSync) write() (roundStats, error) {
	upsert := map[netip.Prefix]spec.IPCacheEntry{}
	var gone []netip.Prefix
	for p := range s.x.dirty {
		if e, ok := s.x.entry(p); ok {
			upsert[p] = e
		} else {
			gone = append(gone, p)
		}
	}
	st := roundStats{computed: len(upsert) + len(gone)}
	var err error
	if st.changed, st.deleted, err = s.ipcache.Update(upsert, gone); err != nil {
		return st, fmt.Errorf("write ipcache: %w", err)
	}
	s.x.clearDirty()
	if s.nodesChanged {
		if err := s.nodes.Replace(RemoteNodes(s.x.view.sorted)); err != nil {
			return st, fmt.Errorf("write remote nodes: %w", err)
		}
		s.nodesChanged = false
	}
	return st, nil
}
