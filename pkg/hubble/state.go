package hubble

import (
	"net/netip"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/identity"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
	"github.com/cilium-go/cilium/pkg/policy"
)

type stateParams struct {
	cell.In
	DB        *statedb.DB
	Endpoints statedb.Table[*endpoint.Desired]
	Watchers  *k8sagent.Watchers `optional:"true"`
	Cookies   *policy.Cookies
	Frontends statedb.Table[*loadbalancer.FrontendRow] `optional:"true"`
}

func newAgentState(p stateParams) *agentState {
	return &agentState{db: p.DB, endpoints: p.Endpoints, watchers: p.Watchers, cookies: p.Cookies, frontends: p.Frontends,
		netns: newNetNSEndpoints(p.DB, p.Endpoints, nodedatapath.NetNSCookie)}
}

// agentState answers the parser from the agent's tables and caches.
type agentState struct {
	db        *statedb.DB
	endpoints statedb.Table[*endpoint.Desired]
	watchers  *k8sagent.Watchers // nil without Kubernetes
	cookies   *policy.Cookies
	frontends statedb.Table[*loadbalancer.FrontendRow] // nil without the load balancer
	netns     *netnsEndpoints
}

func (s *agentState) LocalEndpoint(id uint16) (parser.Endpoint, bool) {
	d, _, ok := s.endpoints.Get(s.db.ReadTxn(), endpoint.IDIndex.Query(id))
	if !ok {
		return parser.Endpoint{}, false
	}
	return parser.Endpoint{ID: d.ID, Identity: d.Identity, Namespace: d.PodNamespace, PodName: d.PodName}, true
}

func (s *agentState) EndpointByIP(addr netip.Addr) (parser.Endpoint, bool) {
	if s.watchers == nil {
		return parser.Endpoint{}, false
	}
	cep, ok := s.watchers.CiliumEndpointByIP(addr)
	if !ok {
		return parser.Endpoint{}, false
	}
	ep := parser.Endpoint{Namespace: cep.Namespace, PodName: cep.Name}
	if st := cep.Status; st.Identity != nil && st.Identity.ID > 0 && st.Identity.ID < 1<<32 {
		ep.Identity = identity.NumericIdentity(st.Identity.ID)
	}
	return ep, true
}

func (s *agentState) IdentityLabels(num identity.NumericIdentity) ([]string, bool) {
	if s.watchers == nil {
		r, ok := identity.ReservedIdentity(num)
		if !ok {
			return nil, false
		}
		return r.Labels.Strings(), true
	}
	ls, ok := s.watchers.IdentityLabels(num)
	return ls.Strings(), ok
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
