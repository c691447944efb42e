package parser

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
)

func tcpEvent(src, dst string, sport uint16) datapath.Event {
	return datapath.Event{Type: datapath.EventTrace, Point: datapath.TraceToLXC, Direction: spec.Ingress, CT: datapath.CTNew,
		Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), SrcPort: sport, DstPort: 80, Protocol: spec.ProtoTCP,
		TCPFlags: 0x02, SrcIdentity: 1000, DstIdentity: 1001, DstEndpoint: 7, Ifindex: 3, Monotonic: 5 * time.Second}
}

// Flows made one after the other share nothing that one of them owns:
// each keeps its own addresses, ports, flags and time.
func TestDecodeFlowsAreTheirOwn(t *testing.T) {
	p := New("node1", &fakeState{})
	p.clock = func() (time.Time, time.Duration, error) { return time.Unix(1000, 0), time.Second, nil }
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
	p := New("node1", &fakeState{})
	ev := tcpEvent("10.0.0.1", "10.0.1.2", 40000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Decode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// A socket trace names the Service before and after the translation, the
// backend's pod after it, and no source: the call has no packet yet.
func TestDecodeSocketTraces(t *testing.T) {
	backend := netip.MustParseAddr("10.0.1.2")
	p := New("node1", &fakeState{services: map[uint16]Service{7: {Name: "echo", Namespace: "default"}},
		byIP: map[netip.Addr]Endpoint{backend: {Identity: 1001, Namespace: "default", PodName: "echo-1"}}})
	sock := func(x datapath.SockXlatePoint, dst string, port uint16) datapath.Event {
		return datapath.Event{Type: datapath.EventTraceSock, Xlate: x, Src: netip.IPv4Unspecified(), Dst: netip.MustParseAddr(dst),
			DstPort: port, Protocol: spec.ProtoTCP, RevNAT: 7}
	}
	for _, c := range []struct {
		ev      datapath.Event
		verdict flow.Verdict
		pod     string
	}{
		{sock(datapath.SockPreForward, "10.96.0.10", 80), flow.Verdict_TRACED, ""},
		{sock(datapath.SockPostForward, backend.String(), 8080), flow.Verdict_TRANSLATED, "echo-1"},
	} {
		f, err := p.Decode(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if f.GetType() != flow.FlowType_SOCK || f.GetVerdict() != c.verdict || f.GetSockXlatePoint() != flow.SocketTranslationPoint(c.ev.Xlate) ||
			f.GetEventType().GetType() != 7 || f.GetEventType().GetSubType() != int32(c.ev.Xlate) {
			t.Errorf("%v: type %v, verdict %v, point %v, event type %v", c.ev.Xlate, f.GetType(), f.GetVerdict(), f.GetSockXlatePoint(), f.GetEventType())
		}
		if f.GetIP().GetSource() != "" || f.GetSource() != nil || f.GetIP().GetDestination() != c.ev.Dst.String() ||
			f.GetL4().GetTCP().GetDestinationPort() != uint32(c.ev.DstPort) || f.GetL4().GetTCP().GetFlags() != nil {
			t.Errorf("%v: IP %v, source %v, L4 %v; want only the destination", c.ev.Xlate, f.GetIP(), f.GetSource(), f.GetL4())
		}
		if svc := f.GetDestinationService(); svc.GetName() != "echo" || svc.GetNamespace() != "default" {
			t.Errorf("%v: destination service %v, want default/echo", c.ev.Xlate, svc)
		}
		if f.GetDestination().GetPodName() != c.pod || f.GetSummary() != "TCP" {
			t.Errorf("%v: destination %v, summary %q", c.ev.Xlate, f.GetDestination(), f.GetSummary())
		}
	}
}
