package datapath

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// skbCtx is the head of struct __sk_buff that BPF_PROG_RUN lets a test
// set and read back: the mark is how a packet is sent to the proxy, and
// how the proxy's own packets say so.
type skbCtx struct {
	Len, PktType, Mark, QueueMapping, Protocol uint32
	VlanPresent, VlanTCI, VlanProto, Priority  uint32
	IngressIfindex, Ifindex                    uint32
	_                                          [192 - 44]byte // the rest, up to hwtstamp
}

// runMarked runs prog on the frame with the mark set and returns the
// verdict, the mark the program left and the frame.
func (e *env) runMarked(prog *ebpf.Program, p pkt, mark uint32) (uint32, uint32, []byte) {
	e.t.Helper()
	frame := p.frame(e.t)
	var out skbCtx
	opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256), Context: skbCtx{Mark: mark}, ContextOut: &out}
	ret, err := prog.Run(opts)
	if err != nil {
		e.t.Fatalf("run %s: %v", prog, err)
	}
	return ret, out.Mark, opts.DataOut
}

// proxySockets opens what the proxy would on port: a transparent TCP
// listener and UDP socket on every address of the test's namespace.
func proxySockets(t *testing.T, port int) {
	t.Helper()
	for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM} {
		fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
		must(t, err)
		t.Cleanup(func() { unix.Close(fd) })
		must(t, unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_TRANSPARENT, 1))
		must(t, unix.Bind(fd, &unix.SockaddrInet4{Port: port}))
		if typ == unix.SOCK_STREAM {
			must(t, unix.Listen(fd, 16))
		}
	}
}

const (
	markProxyIngress = 0x0a00
	markProxyEgress  = 0x0b00
	proxyPort        = 15001
)

func redirected(e spec.PolicyEntry, port uint16) spec.PolicyEntry {
	e.ProxyPort = port
	return e
}

// toProxy runs p through prog (a tc ingress: from-container, or the
// network's way in) and checks that it goes to the proxy: a redirect
// verdict, and then the socket assignment. BPF_PROG_RUN
// is no tc ingress, where alone the kernel assigns a socket to a packet,
// so the assignment fails after the proxy's socket was found
// (DropProxySetFailed); without the proxy's socket the lookup fails
// (DropProxyLookupFailed). Either way the packet is dropped, never sent
// to its destination. The real assignment is TestPrivilegedProxyRedirect's.
func (e *env) toProxy(prog *ebpf.Program, p pkt, proxyOpen bool) {
	e.t.Helper()
	if ret, _, _ := e.runMarked(prog, p, 0); ret != actShot {
		e.t.Fatalf("%v:%d -> %v:%d: verdict %d, want the proxy's", p.src, p.sport, p.dst, p.dport, ret)
	}
	want := spec.DropProxyLookupFailed
	if proxyOpen {
		want = spec.DropProxySetFailed
	}
	var verdict, drop *spec.Event
	for _, ev := range e.drain() {
		switch ev.Type {
		case spec.EventPolicyVerdict:
			verdict = &ev
		case spec.EventDrop:
			drop = &ev
		}
	}
	// A new connection's first packet is judged; the entry's proxy port
	// decides a later packet's way.
	if isNew := p.flags == "S" || p.proto == layers.IPProtocolUDP; isNew != (verdict != nil) ||
		verdict != nil && verdict.Verdict != spec.VerdictRedirect {
		e.t.Fatalf("policy verdict %+v, want redirected for the first packet only", verdict)
	}
	if drop == nil || drop.Reason != want {
		e.t.Fatalf("drop %+v, want %v", drop, want)
	}
}

// straight runs p through from-container and checks that it goes to its
// destination, allowed (not redirected) if new.
func (e *env) straight(p pkt) {
	e.t.Helper()
	e.allowed(e.fromContainer, p)
	for _, ev := range e.drain() {
		if ev.Type == spec.EventPolicyVerdict && ev.Verdict != spec.VerdictAllow {
			e.t.Fatalf("policy verdict %+v, want allowed", ev)
		}
	}
}

func TestPrivilegedProgProxyRedirect(t *testing.T) {
	enforce := envOpts{policyEgress: true, mode: spec.Tunnel}
	runProgCases(t, []progCase{
		{"only the entries with a proxy port send to the proxy", enforce, func(t *testing.T, e *env) {
			proxySockets(t, proxyPort)
			e.setPolicy(epA, redirected(egress(idC, tcpProto, 80, 0), proxyPort), egress(idC, tcpProto, 81, 0),
				redirected(egress(idC, udpProto, 53, 0), proxyPort), egress(idD, udpProto, 53, 0))
			e.toProxy(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), true)
			e.straight(tcp(ipA, ipC, 40000, 81, "S"))
			e.toProxy(e.fromContainer, udp(ipA, ipC, 5000, 53), true)
			e.straight(udp(ipA, ipD, 5000, 53))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 82, "S"), spec.DropPolicy)
		}},
		{"no proxy socket drops, never passes", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, redirected(egress(idC, tcpProto, 80, 0), proxyPort), redirected(egress(idC, udpProto, 53, 0), proxyPort))
			e.toProxy(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), false)
			e.toProxy(e.fromContainer, udp(ipA, ipC, 5000, 53), false)
		}},
		{"a connection sent to the proxy keeps going there while policy sends it there", enforce, func(t *testing.T, e *env) {
			proxySockets(t, proxyPort)
			e.setPolicy(epA, redirected(egress(idC, tcpProto, 80, 0), proxyPort), redirected(egress(idC, udpProto, 53, 0), proxyPort))
			e.toProxy(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), true)
			ct, ok := e.ctEntry(tcp(ipA, ipC, 40000, 80, "S"))
			if !ok || ct.Flags&uint16(lxcCtFlagsCT_F_TO_PROXY) == 0 || ct.ProxyPort != proxyPort {
				t.Fatalf("conntrack entry %+v (found %v), want one for the proxy on %d", ct, ok, proxyPort)
			}
			e.toProxy(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"), true)
			e.toProxy(e.fromContainer, udp(ipA, ipC, 5000, 53), true)
			// Without the layer-7 rules the proxy no longer serves them:
			// their entries go, the TCP connection's next segment drops,
			// and the same UDP tuple, reused, goes straight.
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0), egress(idC, udpProto, 53, 0))
			if _, ok := e.ctEntry(tcp(ipA, ipC, 40000, 80, "S")); ok {
				t.Fatal("the proxied connection's entry stays after its redirect went")
			}
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"), spec.DropUnknownCT)
			e.straight(udp(ipA, ipC, 5000, 53))
			e.straight(tcp(ipA, ipC, 40001, 80, "S"))
		}},
		{"a connection opened before layer-7 rules came goes to the proxy after", enforce, func(t *testing.T, e *env) {
			proxySockets(t, proxyPort)
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0), egress(idC, udpProto, 53, 0))
			e.straight(tcp(ipA, ipC, 40000, 80, "S"))
			e.straight(udp(ipA, ipC, 5000, 53))
			e.setPolicy(epA, redirected(egress(idC, tcpProto, 80, 0), proxyPort), redirected(egress(idC, udpProto, 53, 0), proxyPort))
			if _, ok := e.ctEntry(tcp(ipA, ipC, 40000, 80, "S")); ok {
				t.Fatal("the straight connection's entry stays after layer-7 rules came")
			}
			e.toProxy(e.fromContainer, udp(ipA, ipC, 5000, 53), true)
			e.toProxy(e.fromContainer, tcp(ipA, ipC, 40001, 80, "S"), true)
		}},
		{"an allow with layer-7 rules is not bypassed by a broader allow", enforce, func(t *testing.T, e *env) {
			proxySockets(t, proxyPort)
			e.setPolicy(epA, egress(idC, 0, 0, 0), redirected(egress(0, tcpProto, 80, 0), proxyPort))
			e.toProxy(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), true)
			e.straight(tcp(ipA, ipC, 40000, 8080, "S"))
		}},
		{"ingress entries send a remote client's connection to the proxy", envOpts{policyIngress: true, mode: spec.Tunnel}, func(t *testing.T, e *env) {
			proxySockets(t, proxyPort)
			e.setPolicy(epA, redirected(ingressRule(idC, tcpProto, 80, 0), proxyPort), ingressRule(idC, tcpProto, 81, 0))
			e.toProxy(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "S"), true)
			ct, ok := e.ctEntry(tcp(ipC, ipA, 40000, 80, "S"))
			if !ok || ct.Flags&uint16(lxcCtFlagsCT_F_TO_PROXY) == 0 || ct.ProxyPort != proxyPort {
				t.Fatalf("conntrack entry %+v (found %v), want one for the proxy on %d", ct, ok, proxyPort)
			}
			e.toProxy(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "A"), true)
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 40000, 81, "S"))
			// Without the rules the connection's entry goes and its
			// next segment drops, never reaching the pod unjudged.
			e.setPolicy(epA, ingressRule(idC, tcpProto, 80, 0))
			if _, ok := e.ctEntry(tcp(ipC, ipA, 40000, 80, "S")); ok {
				t.Fatal("the proxied connection's entry stays after its redirect went")
			}
			e.denied(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "A"), spec.DropUnknownCT)
		}},
		{"without the proxy's socket an ingress redirect drops", envOpts{policyIngress: true, mode: spec.Tunnel}, func(t *testing.T, e *env) {
			e.setPolicy(epA, redirected(ingressRule(idC, tcpProto, 80, 0), proxyPort))
			e.toProxy(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "S"), false)
		}},
		{"a local client's connection goes to the proxy of the server's ingress rules", envOpts{ingressB: true, mode: spec.Tunnel}, func(t *testing.T, e *env) {
			proxySockets(t, proxyPort)
			e.setPolicy(epB, redirected(ingressRule(idA, tcpProto, 80, 0), proxyPort), ingressRule(idA, tcpProto, 81, 0))
			e.toProxy(e.fromContainer, tcp(ipA, ipB, 40000, 80, "S"), true)
			e.toProxy(e.fromContainer, tcp(ipA, ipB, 40000, 80, "A"), true)
			e.straight(tcp(ipA, ipB, 40000, 81, "S"))
			e.denied(e.fromContainer, tcp(ipA, ipB, 40000, 82, "S"), spec.DropPolicy)
		}},
	})
}

// The proxy's connection upstream, from pod A's address and marked, is
// judged and tracked as A's, and its replies go to the proxy's socket
// (the node's stack, marked), not into pod A.
func TestPrivilegedProgProxyUpstream(t *testing.T) {
	runProgCases(t, []progCase{
		{"replies from another node go back to the proxy", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			up := tcp(ipA, ipC, 41000, 80, "S")
			if ret, _, _ := e.runMarked(e.toNetdev, up, markProxyEgress); ret != actOK {
				t.Fatalf("upstream SYN: verdict %d", ret)
			}
			ct, ok := e.ctEntry(up)
			if !ok || ct.Flags&uint16(lxcCtFlagsCT_F_PROXY_UPSTREAM) == 0 || ct.SrcIdentity != idA {
				t.Fatalf("conntrack entry %+v (found %v), want the proxy's upstream as A's", ct, ok)
			}
			ret, mark, _ := e.runMarked(e.fromNetdev, tcp(ipC, ipA, 80, 41000, "SA"), 0)
			if ret != actOK || mark&0xf00 != markToProxy {
				t.Fatalf("reply: verdict %d mark %#x, want the stack's with the proxy's mark", ret, mark)
			}
			// The pod's own connection's replies still go into the pod.
			e.allowed(e.fromContainer, tcp(ipA, ipC, 41001, 80, "S"))
			if ret, _, _ := e.runMarked(e.fromNetdev, tcp(ipC, ipA, 80, 41001, "SA"), 0); ret != actRedirect {
				t.Fatalf("reply to the pod's own connection: verdict %d", ret)
			}
		}},
		{"the upstream takes over a tuple the pod used before", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			// The pod's own connection, from the port the node's
			// namespace later gives the proxy's upstream socket.
			e.allowed(e.fromContainer, tcp(ipA, ipC, 41000, 80, "S"))
			if ret, _, _ := e.runMarked(e.toNetdev, tcp(ipA, ipC, 41000, 80, "S"), markProxyEgress); ret != actOK {
				t.Fatalf("upstream SYN: verdict %d", ret)
			}
			if ct, ok := e.ctEntry(tcp(ipA, ipC, 41000, 80, "S")); !ok || ct.Flags&uint16(lxcCtFlagsCT_F_PROXY_UPSTREAM) == 0 {
				t.Fatalf("conntrack entry %+v (found %v): the upstream did not take the tuple over", ct, ok)
			}
			ret, mark, _ := e.runMarked(e.fromNetdev, tcp(ipC, ipA, 80, 41000, "SA"), 0)
			if ret != actOK || mark&0xf00 != markToProxy {
				t.Fatalf("reply: verdict %d mark %#x, want it at the proxy, not in the pod", ret, mark)
			}
			// While the upstream's socket is open the pod's packets on
			// the tuple go nowhere; once it is closed the tuple is the
			// pod's again, for a new connection.
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			must(t, err)
			defer unix.Close(fd)
			must(t, unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_TRANSPARENT, 1))
			must(t, unix.Bind(fd, &unix.SockaddrInet4{Addr: ipA.As4(), Port: 41000}))
			if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: ipC.As4(), Port: 80}); !errors.Is(err, unix.EINPROGRESS) {
				t.Fatalf("upstream socket: %v", err)
			}
			e.denied(e.fromContainer, tcp(ipA, ipC, 41000, 80, "A"), spec.DropUnknownCT)
			unix.Close(fd)
			e.straight(tcp(ipA, ipC, 41000, 80, "S"))
		}},
		{"unmarked, the same packet is no proxy's", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			up := tcp(ipA, ipC, 41000, 80, "S")
			if ret, _, _ := e.runMarked(e.toNetdev, up, 0); ret != actOK {
				t.Fatalf("verdict %d", ret)
			}
			if ct, ok := e.ctEntry(up); ok {
				t.Fatalf("conntrack entry %+v for an unmarked packet of the node", ct)
			}
		}},
		{"a local peer's ingress policy judges it as A", envOpts{mode: spec.Native, policyIngress: true}, func(t *testing.T, e *env) {
			// The harness's to-container is A's: here the proxy acts for
			// B towards A.
			e.setPolicy(epA, ingressRule(idB, tcpProto, 80, 0))
			if ret, _, _ := e.runMarked(e.toContainer, tcp(ipB, ipA, 41000, 80, "S"), markProxyEgress); ret != actOK {
				t.Fatalf("upstream for B: verdict %d", ret)
			}
			ct, ok := e.ctEntry(tcp(ipB, ipA, 41000, 80, "S"))
			if !ok || ct.Flags&uint16(lxcCtFlagsCT_F_PROXY_UPSTREAM) == 0 || ct.SrcIdentity != idB {
				t.Fatalf("conntrack entry %+v (found %v)", ct, ok)
			}
			if ret, _, _ := e.runMarked(e.toContainer, tcp(ipB, ipA, 41001, 81, "S"), markProxyEgress); ret != actShot {
				t.Fatalf("upstream for B to a port B may not reach: verdict %d", ret)
			}
			// A's reply goes back to the proxy, not to B.
			ret, mark, _ := e.runMarked(e.fromContainer, tcp(ipA, ipB, 80, 41000, "SA"), 0)
			if ret != actOK || mark&0xf00 != markToProxy {
				t.Fatalf("reply: verdict %d mark %#x", ret, mark)
			}
		}},
		{"the ingress proxy's connection is not judged again, and its replies go back to it", envOpts{mode: spec.Native, policyIngress: true}, func(t *testing.T, e *env) {
			// A's ingress rules send port 80 to the proxy; the proxy
			// judged C's request by them and connects from C's address.
			e.setPolicy(epA, redirected(ingressRule(idC, tcpProto, 80, 0), proxyPort))
			up := tcp(ipC, ipA, 41000, 80, "S")
			if ret, _, _ := e.runMarked(e.toContainer, up, markProxyIngress); ret != actOK {
				t.Fatalf("ingress proxy's SYN: verdict %d", ret)
			}
			ct, ok := e.ctEntry(up)
			if !ok || ct.Flags&uint16(lxcCtFlagsCT_F_PROXY_UPSTREAM) == 0 || ct.SrcIdentity != idC {
				t.Fatalf("conntrack entry %+v (found %v), want the proxy's upstream as C's", ct, ok)
			}
			ret, mark, _ := e.runMarked(e.fromContainer, tcp(ipA, ipC, 80, 41000, "SA"), 0)
			if ret != actOK || mark&0xf00 != markToProxy {
				t.Fatalf("reply: verdict %d mark %#x, want the proxy's", ret, mark)
			}
			// The same packet from anything else, unmarked, would pass
			// the rules unjudged: no proxy can take it here.
			e.denied(e.toContainer, tcp(ipC, ipA, 41001, 80, "S"), spec.DropProxyLookupFailed)
			// An egress proxy judged the request by A's ingress rules
			// too: its connection passes A's redirecting allow.
			if ret, _, _ := e.runMarked(e.toContainer, tcp(ipC, ipA, 41002, 80, "S"), markProxyEgress); ret != actOK {
				t.Fatalf("egress proxy's SYN to a port of A's ingress rules: verdict %d", ret)
			}
			if ret, _, _ := e.runMarked(e.toContainer, tcp(ipC, ipA, 41003, 81, "S"), markProxyEgress); ret != actShot {
				t.Fatalf("egress proxy's SYN to a port A does not allow: verdict %d", ret)
			}
		}},
		{"to the world it is masqueraded, and the reply comes back to the proxy", envOpts{mode: spec.Native, masquerade: true}, func(t *testing.T, e *env) {
			ret, _, frame := e.runMarked(e.toNetdev, tcp(ipA, ipWorld, 41000, 443, "S"), markProxyEgress)
			if ret != actOK {
				t.Fatalf("verdict %d", ret)
			}
			ip, p := decoded(t, frame)
			sport, _ := ports(p)
			if !ip.SrcIP.Equal(nodeIP.AsSlice()) {
				t.Fatalf("left from %v, want the node's address", ip.SrcIP)
			}
			ret, mark, frame := e.runMarked(e.fromNetdev, tcp(ipWorld, nodeIP, 443, sport, "SA"), 0)
			ip, p = decoded(t, frame)
			_, dport := ports(p)
			if ret != actOK || mark&0xf00 != markToProxy || !ip.DstIP.Equal(ipA.AsSlice()) || dport != 41000 {
				t.Fatalf("reply: verdict %d mark %#x to %v:%d", ret, mark, ip.DstIP, dport)
			}
		}},
	})
}
