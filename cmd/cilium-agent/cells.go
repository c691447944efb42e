package main

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/api/policyview"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/cniconf"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/ciliumendpoint"
	fqdnagent "github.com/cilium-go/cilium/pkg/fqdn/agent"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/healthcheck"
	"github.com/cilium-go/cilium/pkg/hubble"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/identity/allocator"
	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/ipam/clusterpool"
	"github.com/cilium-go/cilium/pkg/ipcache"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	k8stables "github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/l2announce"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
	"github.com/cilium-go/cilium/pkg/metrics"
	"github.com/cilium-go/cilium/pkg/monitor"
	"github.com/cilium-go/cilium/pkg/node"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
	"github.com/cilium-go/cilium/pkg/paths"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
	"github.com/cilium-go/cilium/pkg/pprof"
	proxyagent "github.com/cilium-go/cilium/pkg/proxy/agent"
	"github.com/cilium-go/cilium/pkg/runtimeconfig"
)

// The agent, module by module. Each module owns its flags.
var (
	// Infrastructure: where files go, health, metrics.
	Infrastructure = cell.Group(
		paths.Cell,   // --state-dir, --socket-path, --bpf-root
		health.Cell,  // every module's health, read by /readyz and the API
		metrics.Cell, // --prometheus-serve-addr: /metrics, /healthz (liveness), /readyz (readiness)
		pprof.Cell,   // --pprof, --pprof-address, --pprof-port: Go runtime profiles
		job.Cell,     // long-running work: each module's jobs, under its health
		statedb.Cell, // desired state in tables, for the reconcilers
	)

	// ControlPlane: what the agent decides, and the API to ask it.
	ControlPlane = cell.Group(
		k8sagent.Cell,          // --enable-k8s, --kubeconfig, --k8s-node-name: clients and watchers (none with Kubernetes off)
		k8stables.Cell,         // the cluster's objects as tables, one reflector per kind (empty with Kubernetes off)
		node.ClusterCell,       // the cluster's nodes, from the Node and CiliumNode tables; the API's node list
		ipam.Cell,              // --ipam-pod-cidr: pod addresses
		clusterpool.Cell,       // the pod CIDR from this node's CiliumNode
		allocator.Cell,         // identities of pods from their labels, following relabels
		endpoint.Cell,          // endpoints: create, persist, restore; a table that a reconciler programs
		ciliumendpoint.Cell,    // a CiliumEndpoint for every local endpoint
		ipcache.Cell,           // the ipcache and routes to other nodes' pods: tables that reconcilers program
		policyagent.EngineCell, // --enable-policy: NetworkPolicies and Cilium policies into endpoints' policies
		policyagent.Cell,       // endpoints' policies: a table that a reconciler programs
		policyview.Cell,        // the policy engine's rules, selectors and verdicts for the API
		proxyagent.Cell,        // --enable-l7-proxy, --tofqdns-proxy-port, --proxy-http-port: the layer-7 proxy's ports, policy file and acknowledgements
		fqdnagent.Cell,         // --tofqdns-*: names the DNS proxy learned, kept across restarts, to the policy engine
		fqdnPolicy,             // the policy engine selects learned addresses by name
		fqdnCache,              // the FQDN cache for the API (GET /v1/fqdn/cache)
		fqdnNames,              // the FQDN cache for Hubble: flows' source and destination names
		loadbalancer.Cell,      // --kube-proxy-replacement: Services as frontends and backends, tables that reconcilers program
		lbk8s.Cell,             // the load balancer's services from the Services, EndpointSlices and pods tables
		l2announce.Cell,        // --enable-l2-announcements: one node per Service answers ARP for its addresses, elected by Leases
		server.Cell,            // REST API on the unix socket
		healthcheck.Cell,       // --enable-health-checking, --enable-endpoint-health-checking: the health endpoint, probes of every node, health.sock
		podLabels,              // the endpoints' labels, for the API
		runtimeconfig.Cell,     // the agent's configuration where Cilium's tools read it (<run dir>/state/agent-runtime-config.json)
		cniconf.Cell,           // --write-cni-conf-when-ready: the node's CNI configuration, last
	)

	// Datapath: the kernel side.
	Datapath = cell.Group(
		nodedatapath.Cell, // --node-ipv4, --uplink, --routing-mode, ...: the kernel's side of every reconciler
	)

	// Observability: what the datapath reports, made readable.
	Observability = cell.Group(
		monitor.Cell, // the datapath's events, read once, for GET /v1/monitor and Hubble
		hubble.Cell,  // --enable-hubble, --hubble-socket-path: flows over Hubble's gRPC API
	)

	// fqdnPolicy is the policy engine as the FQDN cache sees it.
	fqdnPolicy = cell.Provide(func(a *policyagent.Agent) fqdnagent.Policy { return a })

	// fqdnCache shows the API the name cache, when the proxy runs.
	fqdnCache = cell.Provide(func(m *fqdnagent.NameManager) server.FQDNCache {
		if m == nil {
			return nil
		}
		return m
	})

	// fqdnNames gives Hubble's parser the names endpoints learned, when
	// the proxy runs.
	fqdnNames = cell.Provide(func(m *fqdnagent.NameManager) parser.Names {
		if m == nil {
			return nil
		}
		return m
	})

	// podLabels shows the API the identities the allocator gave pods.
	podLabels = cell.Provide(func(p *allocator.PodIdentities) server.PodIdentities { return p })

	// Started goes after every other cell: /healthz and /readyz pass once all started.
	Started = metrics.MarkStarted
)
