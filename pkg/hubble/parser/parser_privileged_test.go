package parser

//lint:file-ignore SA1019 the tests check Summary, deprecated in flow.proto, which the parser still fills for clients (parser.go).

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy"
)

// fakeState answers from maps.
type fakeState struct {
	local    map[uint16]Endpoint
	byIP     map[netip.Addr]Endpoint
	labels   map[identity.NumericIdentity][]string
	services map[uint16]Service // by reverse NAT index
	cookies  map[uint32][]Policy
	netns    map[uint64]uint16 // endpoint ids by namespace cookie
}

func (s *fakeState) LocalEndpoint(id uint16) (Endpoint, bool) { e, ok := s.local[id]; return e, ok }
func (s *fakeState) EndpointByIP(a netip.Addr) (Endpoint, bool) {
	e, ok := s.byIP[a]
	return e, ok
}

func (s *fakeState) IdentityLabels(id identity.NumericIdentity) ([]string, bool) {
	l, ok := s.labels[id]
	return l, ok
}

func (s *fakeState) ServiceByRevNAT(index uint16) (Service, bool) {
	svc, ok := s.services[index]
	return svc, ok
}
func (s *fakeState) PolicyOrigins(c uint32) []Policy { return s.cookies[c] }
func (s *fakeState) EndpointByNetNS(c uint64) (uint16, netip.Addr, bool) {
	ep, ok := s.netns[c]
	if !ok {
		return 0, netip.Addr{}, false
	}
	for addr, e := range s.byIP {
		if e.ID == ep {
			return ep, addr, true
		}
	}
	return 0, netip.Addr{}, false
}

// TestPrivilegedFlowsOfRealEvents: a two-node datapath in namespaces
// enforces ingress policy on a server; an allowed client, a client that
// no rule allows and one that a deny rule names connect. The events that
// the server's node's programs emitted become flows that name both pods,
// the verdicts, the drop reasons and the policies that decided.
func TestPrivilegedFlowsOfRealEvents(t *testing.T) {
	testenv.Privileged(t)
	c, err := dptest.New(dptest.Options{Mode: spec.Tunnel, PolicyIngress: true, PodsPerNode: 3,
		Traces: spec.Traces{Enabled: true, Aggregation: spec.AggregationMedium,
			ReportFlags: spec.DefaultReportFlags, ReportInterval: spec.DefaultReportInterval}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("remove cluster: %v", err)
		}
	})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	allowed, unnamed, denied, server := n1.Pods[0], n1.Pods[1], n1.Pods[2], n2.Pods[0]
	srv, err := dptest.ServeTCPEcho(server.NS, server.IP, 8080)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	allow := spec.PolicyEntry{Direction: spec.Ingress, Identity: allowed.Identity, Protocol: spec.ProtoTCP, Port: 8080, Cookie: 7}
	deny := spec.PolicyEntry{Direction: spec.Ingress, Identity: denied.Identity, Protocol: spec.ProtoTCP, Port: 8080, Deny: true, Cookie: 9}
	must(t, n2.DP.Maps().SetPolicy(server.ID, []spec.PolicyEntry{allow, deny}))
	allowPolicy := Policy{Kind: "CiliumNetworkPolicy", Namespace: "x", Name: "allow-client"}
	denyPolicy := Policy{Kind: "CiliumClusterwideNetworkPolicy", Name: "deny-bad"}

	state := &fakeState{local: map[uint16]Endpoint{}, byIP: map[netip.Addr]Endpoint{}, labels: map[identity.NumericIdentity][]string{},
		cookies: map[uint32][]Policy{7: {allowPolicy}, 9: {denyPolicy}}, services: map[uint16]Service{5: {Namespace: "x", Name: "echo"}}}
	for _, p := range c.Pods() {
		ep := Endpoint{Identity: p.Identity, Namespace: "x", PodName: p.Name, Labels: []string{"k8s:app=" + p.Name}}
		state.byIP[p.IP] = ep
		if p.Node == n2 {
			ep.ID = p.ID
			state.local[p.ID] = ep
		}
	}
	parser := New(n2.Name, state, kernelClock)
	// A Service the allowed client also reaches the server through: its
	// node's programs translate, and name the frontend in their events.
	vip := netip.MustParseAddr("172.20.0.10")
	m1 := n1.DP.Maps()
	must(t, m1.UpsertBackend(spec.Backend{ID: 1, Address: server.IP, Port: 8080, Protocol: spec.ProtoTCP}))
	must(t, m1.UpsertRevNAT(spec.RevNAT{Index: 5, Address: vip, Port: 80}))
	must(t, m1.UpsertService(spec.Service{Frontend: spec.Frontend{Address: vip, Port: 80, Protocol: spec.ProtoTCP},
		Backends: []spec.BackendID{1}, RevNATIndex: 5}))

	r, err := n2.DP.Maps().NewEventReader()
	must(t, err)
	t.Cleanup(func() { r.Close() })
	r1, err := m1.NewEventReader()
	must(t, err)
	t.Cleanup(func() { r1.Close() })
	start := time.Now()
	if err := dptest.TCPEcho(allowed.NS, server.IP, 8080); err != nil {
		t.Fatalf("allowed client: %v", err)
	}
	if err := dptest.TCPEcho(allowed.NS, vip, 80); err != nil {
		t.Fatalf("allowed client through the Service: %v", err)
	}
	for _, p := range []*dptest.Pod{unnamed, denied} {
		if conn, err := dptest.DialTCP(p.NS, server.IP, 8080, 300*time.Millisecond); err == nil {
			conn.Close()
			t.Fatalf("%s reached the server", p.Name)
		}
	}

	var flows []*flow.Flow
	r.SetDeadline(time.Now().Add(time.Second))
	for {
		ev, err := r.Read()
		if errors.Is(err, datapath.ErrNoEvent) {
			break
		}
		must(t, err)
		f, err := parser.Decode(ev)
		must(t, err)
		flows = append(flows, f)
	}
	// The client's node: the connection through the Service, named.
	p1 := New(n1.Name, state, kernelClock)
	var clientSide []*flow.Flow
	r1.SetDeadline(time.Now().Add(time.Second))
	for {
		ev, err := r1.Read()
		if errors.Is(err, datapath.ErrNoEvent) {
			break
		}
		must(t, err)
		f, err := p1.Decode(ev)
		must(t, err)
		clientSide = append(clientSide, f)
	}
	// The SYNs out: the direct connection names no Service, the one
	// through the frontend names it; its SYN-ACK comes from it.
	var direct, toSvc, fromSvc *flow.Flow
	for _, f := range clientSide {
		if !f.GetL4().GetTCP().GetFlags().GetSYN() || f.GetEventType().GetType() != int32(spec.EventTrace) {
			continue
		}
		switch {
		case f.GetIsReply().GetValue():
			if f.GetSourceService() != nil {
				fromSvc = f
			}
		case f.GetIP().GetSource() != allowed.IP.String():
		case f.GetDestinationService() != nil:
			toSvc = f
		default:
			direct = f
		}
	}
	if direct == nil || toSvc.GetDestinationService().GetName() != "echo" || toSvc.GetDestinationService().GetNamespace() != "x" ||
		toSvc.GetIP().GetDestination() != server.IP.String() || toSvc.GetL4().GetTCP().GetDestinationPort() != 8080 {
		t.Errorf("the SYNs, direct %v and through the Service %v", direct, toSvc)
	}
	if fromSvc.GetSourceService().GetName() != "echo" || fromSvc.GetIP().GetSource() != vip.String() {
		t.Errorf("the SYN-ACK back through the Service: %v", fromSvc)
	}

	find := func(what string, match func(*flow.Flow) bool) *flow.Flow {
		t.Helper()
		i := slices.IndexFunc(flows, match)
		if i < 0 {
			t.Fatalf("no flow of %s among %d: %v", what, len(flows), flows)
		}
		return flows[i]
	}
	synTo := func(from *dptest.Pod, typ spec.EventType) func(*flow.Flow) bool {
		return func(f *flow.Flow) bool {
			return f.GetIP().GetSource() == from.IP.String() && f.GetL4().GetTCP().GetDestinationPort() == 8080 &&
				f.GetL4().GetTCP().GetFlags().GetSYN() && !f.GetL4().GetTCP().GetFlags().GetACK() &&
				f.GetEventType().GetType() == int32(typ)
		}
	}

	ok := find("the allowed client's verdict", synTo(allowed, spec.EventPolicyVerdict))
	if ok.GetVerdict() != flow.Verdict_FORWARDED || ok.GetTrafficDirection() != flow.TrafficDirection_INGRESS ||
		ok.GetIsReply().GetValue() || ok.GetIsReply() == nil || ok.GetNodeName() != n2.Name || ok.GetType() != flow.FlowType_L3_L4 {
		t.Errorf("allowed verdict: %v", ok)
	}
	if got := ok.GetIngressAllowedBy(); len(got) != 1 || got[0].GetName() != "allow-client" || got[0].GetNamespace() != "x" ||
		got[0].GetKind() != policy.KindCNP {
		t.Errorf("allowed by %v, want the CNP x/allow-client", got)
	}
	src, dst := ok.GetSource(), ok.GetDestination()
	if src.GetPodName() != allowed.Name || src.GetIdentity() != uint32(allowed.Identity) || src.GetID() != 0 ||
		dst.GetPodName() != server.Name || dst.GetID() != uint32(server.ID) || !slices.Equal(dst.GetLabels(), []string{"k8s:app=" + server.Name}) {
		t.Errorf("allowed verdict's endpoints: %v -> %v", src, dst)
	}
	if at := ok.GetTime().AsTime(); at.Before(start.Add(-time.Second)) || at.After(time.Now()) {
		t.Errorf("flow time %v, the traffic ran from %v", at, start)
	}
	if ok.GetUuid() == "" || ok.GetSummary() != "TCP Flags: SYN" {
		t.Errorf("uuid %q, summary %q", ok.GetUuid(), ok.GetSummary())
	}

	// Traces at medium aggregation: the connection's news, not each
	// packet. The SYN goes into the server; the server's SYN-ACK goes
	// out to the tunnel, a reply of a connection that came in.
	in := find("the allowed client's SYN delivered", synTo(allowed, spec.EventTrace))
	if in.GetVerdict() != flow.Verdict_FORWARDED || in.GetTraceObservationPoint() != flow.TraceObservationPoint_TO_ENDPOINT ||
		in.GetTraceReason() != flow.TraceReason_NEW || in.GetTrafficDirection() != flow.TrafficDirection_INGRESS ||
		in.GetDestination().GetPodName() != server.Name {
		t.Errorf("trace of the SYN: %v", in)
	}
	synAck := find("the server's SYN-ACK", func(f *flow.Flow) bool {
		fl := f.GetL4().GetTCP().GetFlags()
		return f.GetEventType().GetType() == int32(spec.EventTrace) && fl.GetSYN() && fl.GetACK() &&
			f.GetIP().GetDestination() == allowed.IP.String()
	})
	if synAck.GetTraceObservationPoint() != flow.TraceObservationPoint_TO_OVERLAY || synAck.GetTraceReason() != flow.TraceReason_REPLY ||
		!synAck.GetIsReply().GetValue() || synAck.GetTrafficDirection() != flow.TrafficDirection_INGRESS ||
		synAck.GetSource().GetPodName() != server.Name {
		t.Errorf("trace of the SYN-ACK: %v", synAck)
	}
	// The echo's data and bare ACKs carry no flag of the default
	// monitor-aggregation-flags (syn, fin, rst): of each of the allowed
	// client's two connections (direct and through the Service) only
	// SYN, SYN-ACK and each side's first FIN are traced.
	traced := map[uint32][]string{} // by the client's port
	for _, f := range flows {
		tcp := f.GetL4().GetTCP()
		if f.GetEventType().GetType() != int32(spec.EventTrace) || tcp == nil {
			continue
		}
		switch allowed.IP.String() {
		case f.GetIP().GetSource():
			traced[tcp.GetSourcePort()] = append(traced[tcp.GetSourcePort()], f.GetSummary())
		case f.GetIP().GetDestination():
			traced[tcp.GetDestinationPort()] = append(traced[tcp.GetDestinationPort()], f.GetSummary())
		}
	}
	want := []string{"TCP Flags: SYN", "TCP Flags: SYN, ACK", "TCP Flags: FIN, ACK", "TCP Flags: FIN, ACK"}
	if len(traced) != 2 {
		t.Errorf("traces of the allowed client's connections %v, want two", traced)
	}
	for port, got := range traced {
		if !slices.Equal(got, want) {
			t.Errorf("traces of the allowed connection from port %d %q, want %q", port, got, want)
		}
	}

	drop := find("the unnamed client's drop", synTo(unnamed, spec.EventDrop))
	if drop.GetVerdict() != flow.Verdict_DROPPED || drop.GetDropReasonDesc() != flow.DropReason_POLICY_DENIED ||
		drop.GetTrafficDirection() != flow.TrafficDirection_INGRESS || len(drop.GetIngressDeniedBy()) != 0 ||
		drop.GetSource().GetPodName() != unnamed.Name {
		t.Errorf("default drop: %v", drop)
	}
	denyDrop := find("the denied client's drop", synTo(denied, spec.EventDrop))
	if denyDrop.GetVerdict() != flow.Verdict_DROPPED || denyDrop.GetDropReasonDesc() != flow.DropReason_POLICY_DENY {
		t.Errorf("deny drop: %v", denyDrop)
	}
	if got := denyDrop.GetIngressDeniedBy(); len(got) != 1 || got[0].GetName() != "deny-bad" || got[0].GetKind() != policy.KindCCNP {
		t.Errorf("denied by %v, want the CCNP deny-bad", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// kernelClock dates the events of a real datapath, as the agent's monitor
// does.
func kernelClock() (time.Time, time.Duration, error) {
	mono, err := datapath.Monotonic()
	return time.Now(), mono, err
}
