package parser

//lint:file-ignore SA1019 the tests check Summary, deprecated in flow.proto, which the parser still fills for clients (parser.go).

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

func tcpEvent(src, dst string, sport uint16) spec.Event {
	return spec.Event{Type: spec.EventTrace, Point: spec.TraceToLXC, Direction: spec.Ingress, CT: spec.CTNew,
		Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), SrcPort: sport, DstPort: 80, Protocol: spec.ProtoTCP,
		TCPFlags: 0x02, SrcIdentity: 1000, DstIdentity: 1001, DstEndpoint: 7, Ifindex: 3, Monotonic: 5 * time.Second}
}

// fixedClock says the kernel booted at 999s past the epoch.
func fixedClock() (time.Time, time.Duration, error) { return time.Unix(1000, 0), time.Second, nil }

// Flows made one after the other share nothing that one of them owns:
// each keeps its own addresses, ports, flags and time.
func TestDecodeFlowsAreTheirOwn(t *testing.T) {
	p := New("node1", &fakeState{}, fixedClock)
	a, err := p.Decode(tcpEvent("10.0.0.1", "10.0.1.2", 40000))
	if err != nil {
		t.Fatal(err)
	}
	second := tcpEvent("10.0.0.3", "10.0.1.4", 40001)
	second.Protocol, second.Monotonic, second.Ifindex = spec.ProtoUDP, 6*time.Second, 0
	b, err := p.Decode(second)
	if err != nil {
		t.Fatal(err)
	}
	check := func(f *flow.Flow, src, dst string, sport uint32, at time.Time) {
		t.Helper()
		if f.GetIP().GetSource() != src || f.GetIP().GetDestination() != dst || f.GetIP().GetIpVersion() != flow.IPVersion_IPv4 {
			t.Errorf("IP %v, want %s -> %s", f.GetIP(), src, dst)
		}
		ports := f.GetL4().GetTCP()
		if ports == nil {
			ports = &flow.TCP{SourcePort: f.GetL4().GetUDP().GetSourcePort(), DestinationPort: f.GetL4().GetUDP().GetDestinationPort()}
		}
		if ports.GetSourcePort() != sport || ports.GetDestinationPort() != 80 {
			t.Errorf("L4 %v, want %d -> 80", f.GetL4(), sport)
		}
		if got := f.GetTime().AsTime(); !got.Equal(at) {
			t.Errorf("time %s, want %s", got, at)
		}
	}
	check(a, "10.0.0.1", "10.0.1.2", 40000, time.Unix(1004, 0))
	check(b, "10.0.0.3", "10.0.1.4", 40001, time.Unix(1005, 0))
	if !a.GetL4().GetTCP().GetFlags().GetSYN() || a.GetInterface().GetIndex() != 3 || a.GetSummary() != "TCP Flags: SYN" {
		t.Errorf("first flow: flags %v, interface %v, summary %q", a.GetL4().GetTCP().GetFlags(), a.GetInterface(), a.GetSummary())
	}
	if b.GetL4().GetUDP() == nil || b.GetInterface() != nil {
		t.Errorf("second flow: L4 %v, interface %v; want UDP and none", b.GetL4(), b.GetInterface())
	}
}

// BenchmarkDecode is the parser's share of a flow's cost.
func BenchmarkDecode(b *testing.B) {
	p := New("node1", &fakeState{}, fixedClock)
	ev := tcpEvent("10.0.0.1", "10.0.1.2", 40000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Decode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// A socket trace names the Service before and after the translation, the
// backend's pod after it, and the caller by its network namespace: its
// pod, or none for a namespace of no endpoint.
func TestDecodeSocketTraces(t *testing.T) {
	backend, caller := netip.MustParseAddr("10.0.1.2"), netip.MustParseAddr("10.0.0.5")
	client := Endpoint{ID: 5, Identity: 1000, Namespace: "default", PodName: "client"}
	p := New("node1", &fakeState{services: map[uint16]Service{7: {Name: "echo", Namespace: "default"}},
		local: map[uint16]Endpoint{5: client},
		byIP:  map[netip.Addr]Endpoint{backend: {Identity: 1001, Namespace: "default", PodName: "echo-1"}, caller: client},
		netns: map[uint64]uint16{99: 5}}, fixedClock)
	sock := func(x spec.SockXlatePoint, dst string, port uint16, netns uint64) spec.Event {
		return spec.Event{Type: spec.EventTraceSock, Xlate: x, Src: netip.IPv4Unspecified(), Dst: netip.MustParseAddr(dst),
			DstPort: port, Protocol: spec.ProtoTCP, RevNAT: 7, NetNSCookie: netns}
	}
	for _, c := range []struct {
		ev           spec.Event
		verdict      flow.Verdict
		from, to, ip string
	}{
		{sock(spec.SockPreForward, "10.96.0.10", 80, 99), flow.Verdict_TRACED, "client", "", caller.String()},
		{sock(spec.SockPostForward, backend.String(), 8080, 99), flow.Verdict_TRANSLATED, "client", "echo-1", caller.String()},
		{sock(spec.SockPreForward, "10.96.0.10", 80, 12345), flow.Verdict_TRACED, "", "", ""},
	} {
		f, err := p.Decode(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if f.GetType() != flow.FlowType_SOCK || f.GetVerdict() != c.verdict || f.GetSockXlatePoint() != flow.SocketTranslationPoint(c.ev.Xlate) ||
			f.GetEventType().GetType() != 7 || f.GetEventType().GetSubType() != int32(c.ev.Xlate) {
			t.Errorf("%v: type %v, verdict %v, point %v, event type %v", c.ev.Xlate, f.GetType(), f.GetVerdict(), f.GetSockXlatePoint(), f.GetEventType())
		}
		if f.GetIP().GetSource() != c.ip || f.GetSource().GetPodName() != c.from || f.GetIP().GetDestination() != c.ev.Dst.String() ||
			f.GetL4().GetTCP().GetDestinationPort() != uint32(c.ev.DstPort) || f.GetL4().GetTCP().GetSourcePort() != 0 ||
			f.GetL4().GetTCP().GetFlags() != nil {
			t.Errorf("%v from namespace %d: IP %v, source %v, L4 %v; want from %q at %q", c.ev.Xlate, c.ev.NetNSCookie, f.GetIP(),
				f.GetSource(), f.GetL4(), c.from, c.ip)
		}
		if svc := f.GetDestinationService(); svc.GetName() != "echo" || svc.GetNamespace() != "default" {
			t.Errorf("%v: destination service %v, want default/echo", c.ev.Xlate, svc)
		}
		if f.GetDestination().GetPodName() != c.to || f.GetSummary() != "TCP" {
			t.Errorf("%v: destination %v, summary %q", c.ev.Xlate, f.GetDestination(), f.GetSummary())
		}
	}
}

// TestClusterOf: a pod's cluster is its identity's cluster label, as in
// Cilium's flows; reserved identities name none.
func TestClusterOf(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{[]string{"k8s:app=echo", "k8s:io.cilium.k8s.policy.cluster=east", "k8s:io.kubernetes.pod.namespace=default"}, "east"},
		{[]string{"reserved:host"}, ""},
		{[]string{"k8s:io.cilium.k8s.policy.cluster.other=x"}, ""},
		{nil, ""},
	} {
		if got := clusterOf(tc.labels); got != tc.want {
			t.Errorf("clusterOf(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}

// A connection the datapath sends to the layer-7 proxy: its policy
// verdict is REDIRECTED, as Cilium's, and its trace is at TO_PROXY.
func TestDecodeProxyRedirect(t *testing.T) {
	p := New("node1", &fakeState{}, fixedClock)
	verdict := tcpEvent("10.0.0.1", "10.0.1.2", 40000)
	verdict.Type, verdict.Verdict, verdict.Direction = spec.EventPolicyVerdict, spec.VerdictRedirect, spec.Egress
	f, err := p.Decode(verdict)
	if err != nil {
		t.Fatal(err)
	}
	if f.GetVerdict() != flow.Verdict_REDIRECTED || f.GetDropReasonDesc() != flow.DropReason_DROP_REASON_UNKNOWN {
		t.Errorf("policy verdict: %v (%v), want REDIRECTED", f.GetVerdict(), f.GetDropReasonDesc())
	}
	trace := tcpEvent("10.0.0.1", "10.0.1.2", 40000)
	trace.Point = spec.TraceToProxy
	if f, err = p.Decode(trace); err != nil {
		t.Fatal(err)
	}
	if f.GetTraceObservationPoint() != flow.TraceObservationPoint_TO_PROXY {
		t.Errorf("trace at %v, want TO_PROXY", f.GetTraceObservationPoint())
	}
}

// DecodeRecord's verdicts are Cilium's for its proxies' records, and a
// record Hubble cannot show is refused.
func TestDecodeRecordVerdicts(t *testing.T) {
	p := New("node1", &fakeState{}, fixedClock)
	base := accesslog.Record{Type: accesslog.Request, Src: netip.MustParseAddrPort("10.0.0.1:40000"),
		Dst: netip.MustParseAddrPort("10.0.1.2:80"), Protocol: spec.ProtoTCP,
		HTTP: &accesslog.HTTPRecord{Method: "GET", URL: "http://web/", Protocol: "HTTP/1.1"}}
	for v, want := range map[accesslog.Verdict]flow.Verdict{
		accesslog.Forwarded: flow.Verdict_FORWARDED, accesslog.Denied: flow.Verdict_DROPPED, accesslog.Errored: flow.Verdict_ERROR,
	} {
		r := base
		r.Verdict = v
		f, err := p.DecodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if f.GetVerdict() != want || f.GetDropReasonDesc() != flow.DropReason_DROP_REASON_UNKNOWN || f.GetDropReason() != 0 {
			t.Errorf("verdict %d: %v (%v %d), want %v and no drop reason", v, f.GetVerdict(), f.GetDropReasonDesc(), f.GetDropReason(), want)
		}
	}
	for name, bad := range map[string]func(*accesslog.Record){
		"no verdict":           func(r *accesslog.Record) { r.Verdict = 0 },
		"no address":           func(r *accesslog.Record) { r.Dst = netip.AddrPort{} },
		"neither DNS nor HTTP": func(r *accesslog.Record) { r.HTTP = nil },
	} {
		r := base
		r.Verdict = accesslog.Forwarded
		bad(&r)
		if _, err := p.DecodeRecord(r); err == nil {
			t.Errorf("%s: a flow, want an error", name)
		}
	}
}

// fakeNames are the names endpoints learned, by endpoint and address.
type fakeNames map[uint16]map[netip.Addr][]string

func (n fakeNames) NamesOf(ep uint16, a netip.Addr) []string { return n[ep][a] }

// A side's names are those the endpoint on the other side learned of its
// address, as in Cilium: the client's names of the server it resolved
// are the destination's on the way there and the source's on the way
// back, another endpoint's are not, and a side that is no endpoint the
// agent knows learned none. The proxy's response names its local
// destination by the record's endpoint, as the agent knows other pods by
// address only.
func TestSideNames(t *testing.T) {
	server := netip.MustParseAddr("192.0.2.10")
	client := Endpoint{ID: 7, Identity: 1001, Namespace: "default", PodName: "client"}
	other := Endpoint{ID: 8, Identity: 1002, Namespace: "default", PodName: "other"}
	names := fakeNames{7: {server: {"api.world.example.", "world.example."}}, 8: {server: {"other.example."}},
		10: {server: {"gone.example."}}} // an endpoint the agent no longer has
	state := &fakeState{local: map[uint16]Endpoint{7: client, 8: other, 9: {ID: 9, Identity: 1003}}}
	p := New("node1", state, fixedClock).WithNames(names)

	egress := func(src string, ep uint16) spec.Event {
		return spec.Event{Type: spec.EventTrace, Point: spec.TraceToStack, Direction: spec.Egress, CT: spec.CTNew,
			Src: netip.MustParseAddr(src), Dst: server, SrcPort: 40000, DstPort: 443, Protocol: spec.ProtoTCP,
			SrcIdentity: 1001, DstIdentity: 2, SrcEndpoint: ep}
	}
	reply := spec.Event{Type: spec.EventTrace, Point: spec.TraceToLXC, Direction: spec.Ingress, CT: spec.CTReply,
		Src: server, Dst: netip.MustParseAddr("10.0.1.5"), SrcPort: 443, DstPort: 40000, Protocol: spec.ProtoTCP,
		SrcIdentity: 2, DstIdentity: 1001, DstEndpoint: 7}
	request := accesslog.Record{Type: accesslog.Request, Verdict: accesslog.Forwarded, Direction: spec.Egress,
		Src: netip.MustParseAddrPort("10.0.1.5:42000"), Dst: netip.AddrPortFrom(server, 80), SrcIdentity: 1001, DstIdentity: 2,
		SrcEndpoint: 7, Protocol: spec.ProtoTCP, HTTP: &accesslog.HTTPRecord{Method: "GET", URL: "http://api.world.example/", Protocol: "HTTP/1.1"}}
	response := request
	response.Type, response.Src, response.Dst = accesslog.Response, request.Dst, request.Src
	response.SrcIdentity, response.DstIdentity, response.SrcEndpoint, response.DstEndpoint = 2, 1001, 0, 7
	response.HTTP = &accesslog.HTTPRecord{Method: "GET", URL: "http://api.world.example/", Protocol: "HTTP/1.1", Code: 200}

	decode := func(ev spec.Event) func(*Parser) (*flow.Flow, error) {
		return func(p *Parser) (*flow.Flow, error) { return p.Decode(ev) }
	}
	record := func(r accesslog.Record) func(*Parser) (*flow.Flow, error) {
		return func(p *Parser) (*flow.Flow, error) { return p.DecodeRecord(r) }
	}
	world := []string{"api.world.example", "world.example"}
	for _, tc := range []struct {
		name     string
		decode   func(*Parser) (*flow.Flow, error)
		src, dst []string
	}{
		{"client to server", decode(egress("10.0.1.5", 7)), nil, world},
		{"server's reply", decode(reply), world, nil},
		{"another endpoint's", decode(egress("10.0.1.6", 8)), nil, []string{"other.example"}},
		{"an endpoint that learned nothing", decode(egress("10.0.1.9", 9)), nil, nil},
		{"no endpoint of the node", decode(egress("10.0.1.10", 10)), nil, nil},
		{"proxy's request", record(request), nil, world},
		{"proxy's response", record(response), world, nil},
	} {
		f, err := tc.decode(p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(f.GetSourceNames(), tc.src) || !slices.Equal(f.GetDestinationNames(), tc.dst) {
			t.Errorf("%s: source names %q, destination names %q; want %q, %q", tc.name, f.GetSourceNames(), f.GetDestinationNames(), tc.src, tc.dst)
		}
		if f, _ := tc.decode(New("node1", state, fixedClock)); len(f.GetSourceNames())+len(f.GetDestinationNames()) > 0 {
			t.Errorf("%s without names: %q, %q", tc.name, f.GetSourceNames(), f.GetDestinationNames())
		}
	}
	// An endpoint's first connection follows the answer at once: its
	// names show though the endpoint's flows had none a moment before.
	names[9] = map[netip.Addr][]string{server: {"late.example."}}
	if f, _ := p.Decode(egress("10.0.1.9", 9)); !slices.Equal(f.GetDestinationNames(), []string{"late.example"}) {
		t.Errorf("names just learned: %q", f.GetDestinationNames())
	}
}
