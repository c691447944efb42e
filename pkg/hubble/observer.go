package hubble

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/metrics"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/monitor"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
)

// observerCell makes flows of the monitor's events into the node's flow
// ring, keeps the agent's events in a ring of their own, and provides the
// Observer service that reads both, and the intake of the layer-7 proxy's
// records into the flow ring (L7Records).
var observerCell = cell.Module("observer", "Datapath events made flows and kept in the node rings",
	cell.Provide(newNodeName, newAgentState, newParser, newFlowRing, newAgentEvents, newObserver, newL7Records),
	cell.Invoke(registerEventJobs),
)

// nodeName is the node's name in flows: the Kubernetes node's, else the
// host's.
type nodeName string

func newNodeName(k k8sagent.Config) nodeName {
	if k.K8sNodeName != "" {
		return nodeName(k.K8sNodeName)
	}
	host, _ := os.Hostname()
	return nodeName(host)
}

// flowRing is the node's flows, last ones kept: the events job writes
// it; the Observer service and the exporter read it.
type flowRing struct{ *container.Ring }

// newFlowRing is nil when Hubble is off, as every part built from it.
func newFlowRing(c Config) (*flowRing, error) {
	if !c.EnableHubble {
		return nil, nil
	}
	r, err := container.NewRing(c.HubbleEventBufferCapacity)
	if err != nil {
		return nil, err
	}
	return &flowRing{r}, nil
}

type parserParams struct {
	cell.In
	Config Config
	Redact RedactConfig
	Node   nodeName
	State  *agentState
	// Names are what endpoints learned through the DNS proxy (the
	// agent's FQDN cache); absent, or nil, without the proxy.
	Names parser.Names `optional:"true"`
}

// newParser makes flows of the datapath's events and of the layer-7
// proxy's records alike, their sides known by their DNS names where
// endpoints learned them, the L7 flows redacted as the --hubble-redact-*
// flags say; nil when Hubble is off.
func newParser(p parserParams) *parser.Parser {
	if !p.Config.EnableHubble {
		return nil
	}
	pr := parser.New(string(p.Node), p.State, monitor.Clock).WithRedaction(p.Redact.Redaction())
	if p.Names != nil {
		pr = pr.WithNames(p.Names)
	}
	return pr
}

func newAgentEvents(c Config, node nodeName) (*agentEvents, error) {
	if !c.EnableHubble {
		return nil, nil
	}
	r, err := container.NewRing(agentEventsCapacity)
	if err != nil {
		return nil, err
	}
	return &agentEvents{ring: r, node: string(node)}, nil
}

func newObserver(ring *flowRing, agent *agentEvents, node nodeName) *hubbleobserver.Server {
	if ring == nil {
		return nil
	}
	return hubbleobserver.New(ring.Ring, string(node), Version).WithAgentEvents(agent.ring)
}

type eventParams struct {
	cell.In
	Config    Config
	Log       *slog.Logger
	Jobs      job.Group
	Monitor   *monitor.Hub
	State     *agentState
	Parser    *parser.Parser
	Ring      *flowRing
	Agent     *agentEvents
	Metrics   *metrics.Metrics
	DB        *statedb.DB
	Endpoints statedb.Table[*endpoint.EndpointRow]
	Policies  statedb.Table[*policyagent.EndpointPolicyRow] `optional:"true"`
	Changes   statedb.Table[*policyagent.PolicyChangeRow]   `optional:"true"`
}

// registerEventJobs subscribes to the monitor and to the policy changes
// now, so that no event after the agent starts is missed, and adds the
// jobs that fill the rings.
func registerEventJobs(p eventParams) error {
	if !p.Config.EnableHubble {
		return nil
	}
	sub := p.Monitor.Subscribe(p.Config.queueSize())
	p.Jobs.Add(job.OneShot("hubble-events", func(ctx context.Context, _ cell.Health) error {
		return ReadEvents(ctx, p.Log, sub, p.Parser, p.Ring.Ring, p.Metrics)
	}))
	agent := p.Agent
	p.Jobs.Add(job.OneShot("hubble-agent-events", func(ctx context.Context, _ cell.Health) error {
		agent.started(time.Now())
		return agent.watchEndpoints(ctx, p.DB, p.Endpoints, p.State.IdentityLabels)
	}))
	if p.Policies != nil {
		p.Jobs.Add(job.OneShot("hubble-policy-refusals", func(ctx context.Context, _ cell.Health) error {
			return agent.watchRefusals(ctx, p.DB, p.Policies, p.State.IdentityLabels)
		}))
	}
	if p.Changes != nil {
		wtxn := p.DB.WriteTxn(p.Changes)
		changes, err := p.Changes.Changes(wtxn)
		wtxn.Commit()
		if err != nil {
			return fmt.Errorf("follow %s: %w", p.Changes.Name(), err)
		}
		p.Jobs.Add(job.OneShot("hubble-policy-changes", func(ctx context.Context, _ cell.Health) error {
			return agent.watchPolicyChanges(ctx, p.DB, changes)
		}))
	}
	return nil
}

// ReadEvents makes flows of the events sub receives until ctx ends, and
// counts them into m when there are metrics.
func ReadEvents(ctx context.Context, log *slog.Logger, sub *monitor.Subscription, pr *parser.Parser, ring *container.Ring, m *metrics.Metrics) error {
	defer sub.Close()
	for {
		ev, lost, ok := sub.Next(ctx)
		if !ok {
			return nil
		}
		if lost > 0 {
			// Readers see the loss where it happened, among the flows.
			ring.Write(container.Event{Lost: &flow.LostEvent{Source: flow.LostEventSource_OBSERVER_EVENTS_QUEUE,
				NumEventsLost: lost, Last: timestamppb.Now()}})
		}
		f, err := pr.Decode(ev)
		if err != nil {
			log.Debug("event not shown", "error", err)
			continue
		}
		ring.Write(container.Event{Flow: f})
		if m != nil {
			m.Process(f)
		}
	}
}
