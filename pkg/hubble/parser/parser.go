// Package parser turns the datapath's events (drops, traces, policy
// verdicts) into Hubble flows, named with what the agent knows: the
// endpoints on both sides, identities' labels, the Service a translated
// connection went to, and the policies whose entry decided.
package parser

//lint:file-ignore SA1019 Hubble clients (hubble observe, older UIs) still read Summary and DropReason, deprecated in flow.proto; Cilium still fills them.

import (
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/hubble/flows"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Endpoint is what the agent knows of a pod.
type Endpoint struct {
	ID        uint16 // on this node; 0 for another node's pod
	Identity  identity.NumericIdentity
	Namespace string
	PodName   string
	// Labels are the identity's labels as source:key=value.
	Labels    []string
	Workloads []*flow.Workload
}

// Service names a Service.
type Service struct{ Name, Namespace string }

// Policy names a policy whose entry decided, as a flow's allowed-by and
// denied-by lists show it. The parser keeps its own type, not the policy
// engine's, so that turning events into flows links no engine.
type Policy struct {
	Kind      string // NetworkPolicy, CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, or a built-in
	Namespace string // empty for cluster-wide kinds
	Name      string
}

// State is what the parser asks of the agent. Every method must be safe
// for concurrent use and answer from memory: the parser runs once per
// event.
type State interface {
	// LocalEndpoint is the endpoint with id on this node.
	LocalEndpoint(id uint16) (Endpoint, bool)
	// EndpointByIP is the pod, on any node, that has addr.
	EndpointByIP(addr netip.Addr) (Endpoint, bool)
	// Identity is an identity's labels as source:key=value.
	IdentityLabels(id identity.NumericIdentity) ([]string, bool)
	// ServiceByRevNAT is the Service of the frontend with the reverse
	// NAT index, the one that translated a connection.
	ServiceByRevNAT(index uint16) (Service, bool)
	// PolicyOrigins are the policies a policy entry's cookie names.
	PolicyOrigins(cookie uint32) []Policy
	// EndpointByNetNS is the local endpoint, and its address, whose
	// network namespace has the cookie (a socket trace's caller).
	EndpointByNetNS(cookie uint64) (id uint16, addr netip.Addr, ok bool)
}

// Names are what the node's endpoints learned through the DNS proxy.
// NamesOf must be safe for concurrent use and answer from memory, as
// State's methods.
type Names interface {
	// NamesOf are the names, fully qualified, that endpoint ep learned of
	// addr; the parser only reads them.
	NamesOf(ep uint16, addr netip.Addr) []string
}

// Clock reads, at one moment, the wall clock and the kernel's monotonic
// clock (CLOCK_MONOTONIC), which the datapath stamps its events with. The
// datapath's reader (pkg/monitor) has the real one.
type Clock func() (wall time.Time, mono time.Duration, err error)

// Parser decodes events of one node.
type Parser struct {
	node  string
	state State
	names Names // nil: flows name no side by DNS names
	clock Clock
	// redaction is what L7 flows leave out; set before the first
	// decode, read without mu.
	redaction Redaction

	// mu is held through a Decode: what follows is its.
	mu         sync.Mutex
	bootWall   time.Time // wall time at monotonic 0, as last measured
	measuredAt time.Time
	// endpoints are the sides flows named since measuredAt: a busy
	// node's flows name the same few, and share what is read-only.
	endpoints map[epKey]*flow.Endpoint
	addrs     map[netip.Addr]string // the addresses' text, likewise
	named     map[nameKey][]string  // the DNS names of a side, likewise
	uuids     *rand.ChaCha8         // seeded from crypto/rand
}

type nameKey struct {
	ep   uint16
	addr netip.Addr
}

type epKey struct {
	id   uint16
	addr netip.Addr
	num  identity.NumericIdentity
}

// Parts every flow shares: nothing changes a flow once made.
var (
	emitter      = &flow.Emitter{Name: "cilium-go"}
	replyTrue    = wrapperspb.Bool(true)
	replyFalse   = wrapperspb.Bool(false)
	eventTypes   = map[[2]int32]*flow.CiliumEventType{}
	eventTypesMu sync.Mutex
)

// New returns a parser for node's events, which clock dates; its L7
// flows leave out what DefaultRedaction says.
func New(node string, state State, clock Clock) *Parser {
	var seed [32]byte
	crand.Read(seed[:])
	return &Parser{node: node, state: state, clock: clock, redaction: DefaultRedaction, endpoints: map[epKey]*flow.Endpoint{},
		addrs: map[netip.Addr]string{}, named: map[nameKey][]string{}, uuids: rand.NewChaCha8(seed)}
}

// WithNames names the sides of flows by the DNS names that endpoints
// learned of them (source_names, destination_names, which Hubble's fqdn
// filters match). Call it before the first Decode.
func (p *Parser) WithNames(n Names) *Parser {
	p.names = n
	return p
}

// WithRedaction makes L7 flows leave out what r says instead of
// DefaultRedaction's. Call it before the first Decode.
func (p *Parser) WithRedaction(r Redaction) *Parser {
	p.redaction = r
	return p
}

// eventType is the shared CiliumEventType of typ and sub.
func eventType(typ, sub int32) *flow.CiliumEventType {
	eventTypesMu.Lock()
	defer eventTypesMu.Unlock()
	k := [2]int32{typ, sub}
	if t, ok := eventTypes[k]; ok {
		return t
	}
	t := &flow.CiliumEventType{Type: typ, SubType: sub}
	eventTypes[k] = t
	return t
}

// Decode makes a flow of an event.
func (p *Parser) Decode(ev spec.Event) (*flow.Flow, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var sub int32
	switch ev.Type {
	case spec.EventDrop:
		sub = int32(ev.Reason)
	case spec.EventTrace:
		sub = int32(ev.Point)
	case spec.EventTraceSock:
		sub = int32(ev.Xlate)
	}
	parts := new(flowParts)
	f := &parts.f
	wall := p.wallTime(ev.Monotonic)
	parts.time.Seconds, parts.time.Nanos = wall.Unix(), int32(wall.Nanosecond())
	f.Time = &parts.time
	f.Uuid = p.newUUID()
	f.Emitter = emitter
	f.Type = flow.FlowType_L3_L4
	f.NodeName = p.node
	f.EventType = eventType(int32(ev.Type), sub)
	switch ev.Type {
	case spec.EventDrop:
		f.Verdict = flow.Verdict_DROPPED
		f.DropReason = uint32(ev.Reason)
		f.DropReasonDesc = flow.DropReason(ev.Reason)
		f.TrafficDirection = direction(ev.Direction)
	case spec.EventTrace:
		f.Verdict = flow.Verdict_FORWARDED
		f.TraceObservationPoint = observationPoint(ev.Point)
		f.TraceReason, f.TrafficDirection = traceReason(ev)
	case spec.EventPolicyVerdict:
		f.TrafficDirection = direction(ev.Direction)
		switch ev.Verdict {
		case spec.VerdictAllow:
			f.Verdict = flow.Verdict_FORWARDED
		case spec.VerdictRedirect:
			f.Verdict = flow.Verdict_REDIRECTED
		default:
			f.Verdict = flow.Verdict_DROPPED
			f.DropReason = uint32(ev.Reason)
			f.DropReasonDesc = flow.DropReason(ev.Reason)
		}
	case spec.EventTraceSock:
		return p.sockFlow(parts, ev), nil
	default:
		return nil, fmt.Errorf("event type %d is not one Hubble shows", uint8(ev.Type))
	}
	if !ev.Src.IsValid() || !ev.Dst.IsValid() {
		return nil, fmt.Errorf("%s event without IPv4 addresses", ev.Type)
	}
	parts.ip.Source, parts.ip.Destination, parts.ip.IpVersion = p.addrString(ev.Src), p.addrString(ev.Dst), flow.IPVersion_IPv4
	f.IP = &parts.ip
	f.L4 = parts.layer4(ev)
	switch ev.CT {
	case spec.CTReply, spec.CTRelated:
		f.IsReply = replyTrue
	case spec.CTNew, spec.CTEstablished:
		f.IsReply = replyFalse
	}
	if ev.Ifindex != 0 {
		parts.iface.Index = ev.Ifindex
		f.Interface = &parts.iface
	}
	f.Source = p.endpoint(ev.SrcEndpoint, ev.Src, ev.SrcIdentity)
	f.Destination = p.endpoint(ev.DstEndpoint, ev.Dst, ev.DstIdentity)
	p.sideNames(f, ev.Src, ev.Dst)
	// The Service the connection went to: a reply comes from it.
	if svc, ok := p.serviceOf(ev.RevNAT); ok {
		named := &flow.Service{Name: svc.Name, Namespace: svc.Namespace}
		if f.IsReply.GetValue() {
			f.SourceService = named
		} else {
			f.DestinationService = named
		}
	}
	p.policies(f, ev)
	if ev.Protocol == spec.ProtoTCP {
		f.Summary = tcpSummaries[ev.TCPFlags]
	} else {
		f.Summary = flows.Summary(f)
	}
	return f, nil
}

// sockFlow finishes a socket trace: a process's connect or send to a
// frontend (TRACED), or the same call translated to its backend
// (TRANSLATED), both naming the Service. The call has no packet yet, no
// source port nor flags; the caller is the pod of its network namespace,
// and stays empty for a process of no pod (the node's own), as Cilium's.
func (p *Parser) sockFlow(parts *flowParts, ev spec.Event) *flow.Flow {
	f := &parts.f
	f.Type = flow.FlowType_SOCK
	f.SockXlatePoint = flow.SocketTranslationPoint(ev.Xlate)
	f.Verdict = flow.Verdict_TRACED
	if ev.Xlate == spec.SockPostForward {
		f.Verdict = flow.Verdict_TRANSLATED
	}
	parts.ip.Destination, parts.ip.IpVersion = p.addrString(ev.Dst), flow.IPVersion_IPv4
	f.IP = &parts.ip
	ev.SrcPort, ev.TCPFlags = 0, 0
	f.L4 = parts.layer4(ev)
	parts.tcpL4.Flags = nil
	var src netip.Addr
	if id, addr, ok := p.state.EndpointByNetNS(ev.NetNSCookie); ok {
		parts.ip.Source = p.addrString(addr)
		f.Source = p.endpoint(id, addr, identity.Unknown)
		src = addr
	}
	f.Destination = p.endpoint(0, ev.Dst, identity.Unknown)
	p.sideNames(f, src, ev.Dst)
	if svc, ok := p.serviceOf(ev.RevNAT); ok {
		f.DestinationService = &flow.Service{Name: svc.Name, Namespace: svc.Namespace}
	}
	switch ev.Protocol {
	case spec.ProtoTCP:
		f.Summary = "TCP"
	case spec.ProtoUDP:
		f.Summary = "UDP"
	default:
		f.Summary = "Unknown"
	}
	return f
}

func (p *Parser) serviceOf(revNAT uint16) (Service, bool) {
	if revNAT == 0 {
		return Service{}, false
	}
	return p.state.ServiceByRevNAT(revNAT)
}

// policies names the rules behind a policy verdict, or behind the drop
// that a deny entry caused.
func (p *Parser) policies(f *flow.Flow, ev spec.Event) {
	if ev.PolicyCookie == 0 || (ev.Type != spec.EventPolicyVerdict && ev.Type != spec.EventDrop) {
		return
	}
	var named []*flow.Policy
	for _, o := range p.state.PolicyOrigins(ev.PolicyCookie) {
		named = append(named, &flow.Policy{Name: o.Name, Namespace: o.Namespace, Kind: o.Kind, Labels: PolicyLabels(o)})
	}
	allowed := ev.Type == spec.EventPolicyVerdict && (ev.Verdict == spec.VerdictAllow || ev.Verdict == spec.VerdictRedirect)
	switch {
	case ev.Direction == spec.Ingress && allowed:
		f.IngressAllowedBy = named
	case ev.Direction == spec.Ingress:
		f.IngressDeniedBy = named
	case allowed:
		f.EgressAllowedBy = named
	default:
		f.EgressDeniedBy = named
	}
}

// PolicyLabels are the labels Cilium derives for a policy's rules.
func PolicyLabels(o Policy) []string {
	ls := []string{"k8s:io.cilium.k8s.policy.derived-from=" + o.Kind, "k8s:io.cilium.k8s.policy.name=" + o.Name}
	if o.Namespace != "" {
		ls = append(ls, "k8s:io.cilium.k8s.policy.namespace="+o.Namespace)
	}
	return ls
}

// addrString is addr as text, shared by the flows of the same second.
func (p *Parser) addrString(addr netip.Addr) string {
	s, ok := p.addrs[addr]
	if !ok {
		s = addr.String()
		p.addrs[addr] = s
	}
	return s
}

// endpoint names one side: a local endpoint by its id, else the pod
// with the address, else what the identity says. Flows of the same
// second share it.
func (p *Parser) endpoint(id uint16, addr netip.Addr, num identity.NumericIdentity) *flow.Endpoint {
	key := epKey{id, addr, num}
	if cached := p.endpoints[key]; cached != nil {
		return cached
	}
	out := p.lookupEndpoint(id, addr, num)
	p.endpoints[key] = out
	return out
}

func (p *Parser) lookupEndpoint(id uint16, addr netip.Addr, num identity.NumericIdentity) *flow.Endpoint {
	ep, ok := Endpoint{}, false
	if id != 0 {
		ep, ok = p.state.LocalEndpoint(id)
	}
	if !ok {
		ep, ok = p.state.EndpointByIP(addr)
	}
	if !ok {
		ep = Endpoint{Identity: num}
	}
	if ep.Identity == identity.Unknown {
		ep.Identity = num
	}
	if len(ep.Labels) == 0 {
		ep.Labels, _ = p.state.IdentityLabels(ep.Identity)
	}
	return &flow.Endpoint{ID: uint32(ep.ID), Identity: uint32(ep.Identity), Namespace: ep.Namespace, PodName: ep.PodName,
		Labels: ep.Labels, Workloads: ep.Workloads, ClusterName: clusterOf(ep.Labels)}
}

// sideNames names each side of f, at src and dst, as Cilium's Hubble
// does: by what the endpoint on the other side learned of its address
// (the names a client resolved the server by are the destination's),
// without the root's trailing dot. A side that is no endpoint of the
// node learned nothing.
func (p *Parser) sideNames(f *flow.Flow, src, dst netip.Addr) {
	f.SourceNames = p.namesOf(f.GetDestination().GetID(), src)
	f.DestinationNames = p.namesOf(f.GetSource().GetID(), dst)
}

// namesOf are the names endpoint ep learned of addr, shared by the flows
// of the same second. Having none is not remembered: the first packets to
// an address come right after the answer that taught its names.
func (p *Parser) namesOf(ep uint32, addr netip.Addr) []string {
	if p.names == nil || ep == 0 || !addr.IsValid() {
		return nil
	}
	key := nameKey{uint16(ep), addr}
	if names, ok := p.named[key]; ok {
		return names
	}
	learned := p.names.NamesOf(key.ep, addr)
	if len(learned) == 0 {
		return nil
	}
	names := make([]string, len(learned))
	for i, n := range learned {
		names[i] = strings.TrimSuffix(n, ".")
	}
	p.named[key] = names
	return names
}

// clusterLabel is the identity label that names a pod's cluster, as
// Cilium's parser reads it for Endpoint.cluster_name (hubble observe
// --cluster).
const clusterLabel = "k8s:io.cilium.k8s.policy.cluster="

func clusterOf(labels []string) string {
	for _, l := range labels {
		if name, ok := strings.CutPrefix(l, clusterLabel); ok {
			return name
		}
	}
	return ""
}

// flowParts are a flow and the messages of its own that it points to,
// made with one allocation: a busy node makes tens of thousands a second.
type flowParts struct {
	f     flow.Flow
	time  timestamppb.Timestamp
	ip    flow.IP
	iface flow.NetworkInterface
	l4    flow.Layer4
	tcp   flow.Layer4_TCP
	tcpL4 flow.TCP
	udp   flow.Layer4_UDP
	udpL4 flow.UDP
}

func (parts *flowParts) layer4(ev spec.Event) *flow.Layer4 {
	switch ev.Protocol {
	case spec.ProtoTCP:
		parts.tcpL4.SourcePort, parts.tcpL4.DestinationPort, parts.tcpL4.Flags = uint32(ev.SrcPort), uint32(ev.DstPort), tcpFlagSets[ev.TCPFlags]
		parts.tcp.TCP = &parts.tcpL4
		parts.l4.Protocol = &parts.tcp
		return &parts.l4
	case spec.ProtoUDP:
		parts.udpL4.SourcePort, parts.udpL4.DestinationPort = uint32(ev.SrcPort), uint32(ev.DstPort)
		parts.udp.UDP = &parts.udpL4
		parts.l4.Protocol = &parts.udp
		return &parts.l4
	case spec.ProtoSCTP:
		return &flow.Layer4{Protocol: &flow.Layer4_SCTP{SCTP: &flow.SCTP{SourcePort: uint32(ev.SrcPort), DestinationPort: uint32(ev.DstPort)}}}
	case spec.ProtoICMP:
		// The datapath's events carry the echo id in a port, not the
		// type: a request names it as the source port.
		typ := uint32(0)
		if ev.SrcPort != 0 || ev.DstPort == 0 {
			typ = 8
		}
		return &flow.Layer4{Protocol: &flow.Layer4_ICMPv4{ICMPv4: &flow.ICMPv4{Type: typ}}}
	}
	return nil
}

func direction(d spec.Direction) flow.TrafficDirection {
	switch d {
	case spec.Ingress:
		return flow.TrafficDirection_INGRESS
	case spec.Egress:
		return flow.TrafficDirection_EGRESS
	}
	return flow.TrafficDirection_TRAFFIC_DIRECTION_UNKNOWN
}

// traceReason is what conntrack said of a traced packet, and the
// direction of its connection as the endpoint sees it: a reply that an
// endpoint sends belongs to a connection coming in. Where packets arrive
// from outside the datapath has not asked conntrack.
func traceReason(ev spec.Event) (flow.TraceReason, flow.TrafficDirection) {
	switch ev.Point {
	case spec.TraceFromLXC, spec.TraceFromHost, spec.TraceFromOverlay, spec.TraceFromNetwork:
		return flow.TraceReason_TRACE_REASON_UNKNOWN, flow.TrafficDirection_TRAFFIC_DIRECTION_UNKNOWN
	}
	dir := direction(ev.Direction)
	switch ev.CT {
	case spec.CTNew:
		return flow.TraceReason_NEW, dir
	case spec.CTEstablished:
		return flow.TraceReason_ESTABLISHED, dir
	case spec.CTReply:
		switch dir {
		case flow.TrafficDirection_INGRESS:
			dir = flow.TrafficDirection_EGRESS
		case flow.TrafficDirection_EGRESS:
			dir = flow.TrafficDirection_INGRESS
		}
		return flow.TraceReason_REPLY, dir
	case spec.CTRelated:
		return flow.TraceReason_RELATED, dir
	}
	return flow.TraceReason_TRACE_REASON_UNKNOWN, dir
}

var observationPoints = map[spec.TracePoint]flow.TraceObservationPoint{
	spec.TraceToLXC:       flow.TraceObservationPoint_TO_ENDPOINT,
	spec.TraceToProxy:     flow.TraceObservationPoint_TO_PROXY,
	spec.TraceToHost:      flow.TraceObservationPoint_TO_HOST,
	spec.TraceToStack:     flow.TraceObservationPoint_TO_STACK,
	spec.TraceToOverlay:   flow.TraceObservationPoint_TO_OVERLAY,
	spec.TraceFromLXC:     flow.TraceObservationPoint_FROM_ENDPOINT,
	spec.TraceFromHost:    flow.TraceObservationPoint_FROM_HOST,
	spec.TraceFromOverlay: flow.TraceObservationPoint_FROM_OVERLAY,
	spec.TraceFromNetwork: flow.TraceObservationPoint_FROM_NETWORK,
}

func observationPoint(p spec.TracePoint) flow.TraceObservationPoint {
	return observationPoints[p] // UNKNOWN_POINT for one not listed
}

// wallTime converts the kernel's monotonic clock to the wall clock.
func (p *Parser) wallTime(mono time.Duration) time.Time {
	p.refresh()
	return p.bootWall.Add(mono)
}

// refresh measures the clocks' offset again every second (the wall clock
// may step), and forgets the sides named since: what the agent knows of
// the endpoints, and what they learned of names, may have changed.
func (p *Parser) refresh() {
	if now := time.Now(); p.bootWall.IsZero() || now.Sub(p.measuredAt) > time.Second {
		if wall, m, err := p.clock(); err == nil {
			p.bootWall, p.measuredAt = wall.Add(-m), now
		}
		clear(p.endpoints)
		clear(p.addrs)
		clear(p.named)
	}
}

// newUUID is a random (version 4) UUID, as Hubble gives every flow.
func (p *Parser) newUUID() string {
	var b [16]byte
	p.uuids.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	hex.Encode(out[9:13], b[4:6])
	hex.Encode(out[14:18], b[6:8])
	hex.Encode(out[19:23], b[8:10])
	hex.Encode(out[24:], b[10:])
	out[8], out[13], out[18], out[23] = '-', '-', '-', '-'
	return string(out[:])
}

func tcpFlags(fl uint8) *flow.TCPFlags {
	return &flow.TCPFlags{FIN: fl&0x01 != 0, SYN: fl&0x02 != 0, RST: fl&0x04 != 0, PSH: fl&0x08 != 0,
		ACK: fl&0x10 != 0, URG: fl&0x20 != 0, ECE: fl&0x40 != 0, CWR: fl&0x80 != 0}
}

// tcpFlagSets are the flags of each flag byte, shared by the flows.
var tcpFlagSets = func() (out [256]*flow.TCPFlags) {
	for b := range out {
		out[b] = tcpFlags(uint8(b))
	}
	return out
}()

// tcpSummaries are the summaries of TCP flows by their flag byte, made
// once.
var tcpSummaries = func() (out [256]string) {
	for b := range out {
		out[b] = flows.Summary(&flow.Flow{L4: &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{Flags: tcpFlagSets[b]}}}})
	}
	return out
}()
