package hubble

import (
	"net/netip"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
	"github.com/cilium-go/cilium/pkg/policy"
)

type stateParams struct {
	cell.In
	DB        *statedb.DB
	Endpoints statedb.Table[*endpoint.EndpointRow]
	// The cluster's CiliumEndpoints and CiliumIdentities; empty, or
	// absent, without Kubernetes.
	CiliumEndpoints  statedb.Table[*v2.CiliumEndpoint] `optional:"true"`
	CiliumIdentities statedb.Table[*v2.CiliumIdentity] `optional:"true"`
	// This node's pods, whose owners name their workloads; absent
	// without Kubernetes.
	Pods      statedb.Table[*corev1.Pod] `optional:"true"`
	Cookies   *policy.Cookies
	Frontends statedb.Table[*loadbalancer.FrontendRow] `optional:"true"`
}

func newAgentState(p stateParams) *agentState {
	return &agentState{db: p.DB, endpoints: p.Endpoints, ceps: p.CiliumEndpoints, identities: p.CiliumIdentities,
		pods: p.Pods, cookies: p.Cookies, frontends: p.Frontends,
		netns: newNetNSEndpoints(p.DB, p.Endpoints, nodedatapath.NetNSCookie)}
}

// agentState answers the parser from the agent's tables and caches.
type agentState struct {
	db         *statedb.DB
	endpoints  statedb.Table[*endpoint.EndpointRow]
	ceps       statedb.Table[*v2.CiliumEndpoint] // nil without Kubernetes
	identities statedb.Table[*v2.CiliumIdentity] // nil without Kubernetes
	pods       statedb.Table[*corev1.Pod]        // nil without Kubernetes
	cookies    *policy.Cookies
	frontends  statedb.Table[*loadbalancer.FrontendRow] // nil without the load balancer
	netns      *netnsEndpoints
}

func (s *agentState) LocalEndpoint(id uint16) (parser.Endpoint, bool) {
	d, _, ok := s.endpoints.Get(s.db.ReadTxn(), endpoint.IDIndex.Query(id))
	if !ok {
		return parser.Endpoint{}, false
	}
	return parser.Endpoint{ID: d.ID, Identity: d.Identity, Namespace: d.PodNamespace, PodName: d.PodName,
		Workloads: s.workloads(d.PodNamespace, d.PodName)}, true
}

// workloads are those of the pod namespace/name, if it is this node's:
// as in Cilium, another node's pods are known by their CiliumEndpoints,
// which do not name their owners.
func (s *agentState) workloads(namespace, name string) []*flow.Workload {
	if s.pods == nil || name == "" {
		return nil
	}
	pod, ok := tables.Get(s.db.ReadTxn(), s.pods, namespace+"/"+name)
	if !ok {
		return nil
	}
	if w, ok := workloadOf(pod); ok {
		return []*flow.Workload{w}
	}
	return nil
}

func (s *agentState) EndpointByIP(addr netip.Addr) (parser.Endpoint, bool) {
	if s.ceps == nil {
		return parser.Endpoint{}, false
	}
	cep, _, ok := s.ceps.Get(s.db.ReadTxn(), tables.EndpointIPIndex.Query(addr))
	if !ok {
		return parser.Endpoint{}, false
	}
	ep := parser.Endpoint{Namespace: cep.Namespace, PodName: cep.Name, Workloads: s.workloads(cep.Namespace, cep.Name)}
	if st := cep.Status; st.Identity != nil && st.Identity.ID > 0 && st.Identity.ID < 1<<32 {
		ep.Identity = identity.NumericIdentity(st.Identity.ID)
	}
	return ep, true
}

func (s *agentState) IdentityLabels(num identity.NumericIdentity) ([]string, bool) {
	if r, ok := identity.ReservedIdentity(num); ok {
		return r.Labels.Strings(), true
	}
	if s.identities == nil {
		return nil, false
	}
	ci, ok := tables.Get(s.db.ReadTxn(), s.identities, num.String())
	if !ok {
		return nil, false
	}
	return labels.FromClusterIdentity(ci.SecurityLabels).Strings(), true
}

// ServiceByRevNAT is the Service of the frontend with the index.
func (s *agentState) ServiceByRevNAT(index uint16) (parser.Service, bool) {
	if s.frontends == nil {
		return parser.Service{}, false
	}
	r, _, ok := s.frontends.Get(s.db.ReadTxn(), loadbalancer.FrontendRevNATIndex.Query(index))
	if !ok {
		return parser.Service{}, false
	}
	return parser.Service{Name: r.Service.Name, Namespace: r.Service.Namespace}, true
}

func (s *agentState) PolicyOrigins(cookie uint32) []parser.Policy {
	origins := s.cookies.Origins(cookie)
	out := make([]parser.Policy, len(origins))
	for i, o := range origins {
		out[i] = parser.Policy(o)
	}
	return out
}

func (s *agentState) EndpointByNetNS(cookie uint64) (uint16, netip.Addr, bool) {
	return s.netns.lookup(cookie)
}
