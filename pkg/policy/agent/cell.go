// Package agent runs the policy engine in the agent: a hive cell whose
// job owns the engine (pkg/policy), feeds it the changes of its input
// tables (the policies of pkg/k8s/tables, which pkg/policy/k8s
// translates, with the Services and CIDR groups they name; the
// cluster's identities and named ports; the local endpoints), and
// writes each endpoint's policy, and each policy's last change, into
// statedb tables; a reconciler makes each endpoint's policy map in the
// datapath match them, the changed policy groups (endpoint, direction,
// remote identity) of an endpoint at a time.
package agent

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/policy"
)

// Config holds the policy engine's flags.
type Config struct {
	EnablePolicy string
}

// DefaultConfig is Cilium's default: isolate what rules select.
var DefaultConfig = Config{EnablePolicy: string(policy.ModeDefault)}

// Flags implements cell.Flagger.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("enable-policy", def.EnablePolicy,
		"Policy enforcement: default (endpoints that rules select are isolated), always (every endpoint is), never")
}

// EngineCell runs the policy engine: it reads NetworkPolicies,
// CiliumNetworkPolicies, CiliumClusterwideNetworkPolicies, the cluster's
// identities and the local endpoints, and writes every endpoint's policy
// into the table that the policy map's reconciler programs. It provides
// the endpoint manager's PolicyGate, the table of the prefixes that rules
// name (the ipcache's input), and the table of policy changes
// (statedb.Table[*PolicyChangeRow]) that tells of each policy's updates.
var EngineCell = cell.Module("policy", "Network policy rules to endpoints policy map entries",
	cell.Config(DefaultConfig),
	cell.ProvidePrivate(NewPolicyChangesTable),
	cell.Provide(statedb.RWTable[*PolicyChangeRow].ToTable),
	cell.Provide(newAgent, func(a *Agent) endpoint.PolicyGate { return a },
		ipcache.NewPrefixesTable, statedb.RWTable[*ipcache.PolicyPrefixRow].ToTable),
	health.JobGroup,
	cell.Invoke(func(jobs job.Group, a *Agent) error {
		desired.CollectTombstones(jobs, a.db, a.entries, DeletedIndex)
		return a.start(jobs)
	}),
)

// MapConfig sizes the endpoints' policy maps, as Cilium's flag does,
// and bounds how long their redirects wait for the layer-7 proxy.
type MapConfig struct {
	// BPFPolicyMapMax is how many entries each endpoint's policy map
	// holds; a policy that needs more is refused for that endpoint.
	BPFPolicyMapMax int `mapstructure:"bpf-policy-map-max"`
	// ProxyAckTimeout is how long a new redirect to the layer-7 proxy
	// waits for the proxy to acknowledge the policy that judges its
	// connections (see proxyGate); 0: it does not wait.
	ProxyAckTimeout time.Duration `mapstructure:"proxy-ack-timeout"`
}

// DefaultMapConfig: Cilium's map size; a wait for the proxy of a few of
// its loads.
var DefaultMapConfig = MapConfig{BPFPolicyMapMax: 16384, ProxyAckTimeout: 2 * time.Second}

// Flags implements cell.Flagger.
func (def MapConfig) Flags(flags *pflag.FlagSet) {
	flags.Int("bpf-policy-map-max", def.BPFPolicyMapMax,
		"entries of each endpoint's policy map: a policy that needs more for an endpoint is refused for it, the endpoint keeping its previous policy")
	flags.Duration("proxy-ack-timeout", def.ProxyAckTimeout,
		"How long a new redirect to the layer-7 proxy waits for the proxy to load the policy that judges it before the policy map takes it anyway (0: no wait)")
}

// Validate names the flag when it is out of Cilium's range.
func (c MapConfig) Validate() error {
	if c.BPFPolicyMapMax < 1<<8 || c.BPFPolicyMapMax > 1<<16 {
		return fmt.Errorf("--bpf-policy-map-max %d: want %d to %d", c.BPFPolicyMapMax, 1<<8, 1<<16)
	}
	if c.ProxyAckTimeout < 0 {
		return fmt.Errorf("--proxy-ack-timeout %s: want 0 or more", c.ProxyAckTimeout)
	}
	return nil
}

// Cell provides the tables (statedb.RWTable for the policy engine,
// statedb.Table for readers) and reconciles the entries into the maps
// that a MapSource from the datapath gives. Its table of the layer-7
// proxy's acknowledgements (ProxyAckRow), which the proxy's cell
// writes, holds redirects back until the proxy knows their policy.
var Cell = cell.Module("policy-map", "Endpoint policies reconciled into the endpoints policy maps",
	cell.Config(DefaultMapConfig),
	cell.Invoke(MapConfig.Validate),
	cell.Provide(NewTable, statedb.RWTable[*EndpointPolicyRow].ToTable,
		NewEntriesTable, statedb.RWTable[*PolicyEntryRow].ToTable, policy.NewCookies,
		NewProxyAcksTable, statedb.RWTable[*ProxyAckRow].ToTable),
	health.JobGroup,
	cell.Invoke(RegisterReconciler),
)

type agentParams struct {
	cell.In
	Config    Config
	Log       *slog.Logger
	DB        *statedb.DB
	Table     statedb.RWTable[*EndpointPolicyRow]
	Entries   statedb.RWTable[*PolicyEntryRow]
	Changes   statedb.RWTable[*PolicyChangeRow]
	Cookies   *policy.Cookies
	Endpoints statedb.Table[*endpoint.EndpointRow]
	Prefixes  statedb.RWTable[*ipcache.PolicyPrefixRow]
	// K8s names this node, in the policies' status.
	K8s     k8sagent.Config   `optional:"true"`
	Clients *k8sagent.Clients `optional:"true"`
	// The Kubernetes tables the engine reads.
	Pods             statedb.Table[*corev1.Pod]
	Services         statedb.Table[*corev1.Service]
	EndpointSlices   statedb.Table[*discoveryv1.EndpointSlice]
	NetworkPolicies  statedb.Table[*networkingv1.NetworkPolicy]
	CNPs             statedb.Table[*v2.CiliumNetworkPolicy]
	CCNPs            statedb.Table[*v2.CiliumClusterwideNetworkPolicy]
	CiliumIdentities statedb.Table[*v2.CiliumIdentity]
	CiliumEndpoints  statedb.Table[*v2.CiliumEndpoint]
	CIDRGroups       statedb.Table[*v2.CiliumCIDRGroup]
	// MapConfig sizes the policy maps the engine's endpoints must fit.
	MapConfig MapConfig `optional:"true"`
	// Proxy is the node's layer-7 proxy; without it, layer-7 rules and
	// toFQDNs are refused.
	Proxy *policy.ProxyPorts `optional:"true"`
	// Restored are the CIDR identities of before a restart.
	Restored RestoredCIDRs `optional:"true"`
}

// RestoredCIDRs are the CIDR identities that the datapath's ipcache still
// holds from before a restart, by prefix: the engine gives each prefix
// the identity the datapath already judges it by (a toFQDNs address's
// too), where numbering them anew would break the connections open to
// them. Empty on a node's first start.
type RestoredCIDRs map[netip.Prefix]identity.NumericIdentity

func newAgent(p agentParams) (*Agent, error) {
	mode, err := policy.ParseMode(p.Config.EnablePolicy)
	if err != nil {
		return nil, err
	}
	txn := p.DB.WriteTxn(p.Entries, p.Prefixes)
	done := p.Entries.RegisterInitializer(txn, "policy-engine")
	prefixesDone := p.Prefixes.RegisterInitializer(txn, "policy-engine")
	txn.Commit()
	a := &Agent{log: p.Log, db: p.DB, tbl: p.Table, entries: p.Entries, changes: p.Changes, cookies: p.Cookies, eps: p.Endpoints,
		clients: p.Clients, node: p.K8s.K8sNodeName, mode: mode, engine: policy.NewEngine(mode), initDone: done, wake: desired.NewSignal(),
		in: inputTables{Pods: p.Pods, Services: p.Services, EndpointSlices: p.EndpointSlices, NetworkPolicies: p.NetworkPolicies,
			CNPs: p.CNPs, CCNPs: p.CCNPs, CiliumIdentities: p.CiliumIdentities, CiliumEndpoints: p.CiliumEndpoints, CIDRGroups: p.CIDRGroups},
		depPolicies: map[policy.Origin]*dependentPolicy{}, prefixes: p.Prefixes, prefixesInit: prefixesDone, refusals: map[uint16]*policy.Refusal{},
		pendingChanges: map[policy.Origin]*PolicyChangeRow{}}
	a.engine.LimitEntries(p.MapConfig.BPFPolicyMapMax)
	a.engine.RestoreCIDRIdentities(p.Restored)
	if p.Proxy != nil {
		a.engine.SetProxyPorts(*p.Proxy)
		a.l7Proxy = true
	}
	return a, nil
}
