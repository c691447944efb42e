package datapath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

func TestPrivilegedProgForwarding(t *testing.T) {
	runProgCases(t, []progCase{
		{"local pod is redirected into its peer", envOpts{}, func(t *testing.T, e *env) {
			out := e.expect(e.fromContainer, tcp(ipA, ipB, 40000, 80, "S").frame(t), actRedirect)
			if !bytes.Equal(out[0:6], macB) || !bytes.Equal(out[6:12], hostMacB) {
				t.Fatalf("MACs %x %x, want %x %x", out[0:6], out[6:12], macB, hostMacB)
			}
		}},
		{"netkit: local pod is redirected out of its host device", envOpts{netkit: true, ingressB: true}, func(t *testing.T, e *env) {
			// B's ingress policy is judged here, as without netkit; no
			// entry admits A, so the SYN is dropped.
			e.denied(e.fromContainer, tcp(ipA, ipB, 40000, 80, "S"), spec.DropPolicy)
			must(t, e.maps.SetPolicy(epB, []spec.PolicyEntry{{Direction: spec.Ingress, Identity: idA}}))
			out := e.expect(e.fromContainer, tcp(ipA, ipB, 40001, 80, "S").frame(t), actRedirect)
			if !bytes.Equal(out[0:6], macB) || !bytes.Equal(out[6:12], hostMacB) {
				t.Fatalf("MACs %x %x, want %x %x", out[0:6], out[6:12], macB, hostMacB)
			}
		}},
		{"remote pod in tunnel mode goes to the overlay", envOpts{mode: spec.Tunnel, trace: true}, func(t *testing.T, e *env) {
			e.expect(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S").frame(t), actRedirect)
			evs := e.drain()
			if len(evs) != 1 || evs[0].Point != spec.TraceToOverlay || evs[0].DstIdentity != idC {
				t.Fatalf("events %+v, want one trace to overlay", evs)
			}
		}},
		{"remote pod in native mode is routed by the FIB", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			out := e.expect(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S").frame(t), actRedirect)
			if !bytes.Equal(out[0:6], macNext) {
				t.Fatalf("next hop MAC %x, want %x", out[0:6], macNext)
			}
		}},
		{"routing counts the hop like the stack would", envOpts{}, func(t *testing.T, e *env) {
			out := e.expect(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S").frame(t), actRedirect)
			if ip, _ := decoded(t, out); ip.TTL != 63 {
				t.Fatalf("TTL %d, want 63", ip.TTL)
			}
			last := tcp(ipA, ipC, 40001, 80, "S")
			last.ttl = 1
			e.expect(e.fromContainer, last.frame(t), actOK) // the stack sends time exceeded
		}},
		{"the hop count's checksum update holds for every TTL", envOpts{}, func(t *testing.T, e *env) {
			// The incremental update must carry correctly whatever the
			// checksum was; decoded recomputes and compares it.
			for ttl := 2; ttl <= 255; ttl++ {
				p := tcp(ipA, ipC, uint16(30000+ttl), 80, "S")
				p.ttl = uint8(ttl)
				out := e.expect(e.fromContainer, p.frame(t), actRedirect)
				if ip, _ := decoded(t, out); int(ip.TTL) != ttl-1 {
					t.Fatalf("TTL %d, want %d", ip.TTL, ttl-1)
				}
			}
		}},
		{"legacy routing hands the packet to the stack", envOpts{legacyRouting: true}, func(t *testing.T, e *env) {
			e.expect(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S").frame(t), actOK)
		}},
		{"native mode ignores the tunnel endpoint", envOpts{mode: spec.Native, trace: true}, func(t *testing.T, e *env) {
			e.expect(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S").frame(t), actRedirect)
			if evs := e.drain(); len(evs) != 1 || evs[0].Point != spec.TraceToStack {
				t.Fatalf("events %+v, want one trace to stack", evs)
			}
		}},
		{"the world is routed by the FIB", envOpts{trace: true}, func(t *testing.T, e *env) {
			e.expect(e.fromContainer, udp(ipA, ipWorld, 5000, 53).frame(t), actRedirect)
			if evs := e.drain(); len(evs) != 1 || evs[0].DstIdentity != identity.World {
				t.Fatalf("events %+v, want a trace to world", evs)
			}
		}},
		{"what the FIB cannot route goes to the stack", envOpts{}, func(t *testing.T, e *env) {
			e.expect(e.fromContainer, udp(ipA, netip.MustParseAddr("9.9.9.9"), 5000, 53).frame(t), actOK)
		}},
		{"the node's address goes to the stack", envOpts{}, func(t *testing.T, e *env) {
			e.expect(e.fromContainer, tcp(ipA, nodeIP, 40000, 22, "S").frame(t), actOK)
		}},
		{"ARP passes", envOpts{policyEgress: true}, func(t *testing.T, e *env) {
			e.expect(e.fromContainer, arpFrame(t), actOK)
		}},
		{"IPv6 is dropped as unsupported", envOpts{}, func(t *testing.T, e *env) {
			e.expect(e.fromContainer, ipv6Frame(t), actShot)
			if evs := e.drain(); len(evs) != 1 || evs[0].Reason != spec.DropUnsupportedL3 {
				t.Fatalf("events %+v", evs)
			}
		}},
		{"a malformed IPv4 header is dropped", envOpts{}, func(t *testing.T, e *env) {
			f := tcp(ipA, ipB, 1, 2, "S").frame(t)
			f[14] = 0x44 // IHL 4: shorter than the fixed header
			e.expect(e.fromContainer, f, actShot)
			if evs := e.drain(); len(evs) != 1 || evs[0].Reason != spec.DropInvalid {
				t.Fatalf("events %+v", evs)
			}
		}},
		{"a spoofed source is dropped", envOpts{}, func(t *testing.T, e *env) {
			ev := e.denied(e.fromContainer, tcp(ipB, ipC, 40000, 80, "S"), spec.DropInvalidSource)
			if ev.Src != ipB || ev.SrcEndpoint != epA {
				t.Fatalf("drop event %+v", ev)
			}
		}},
		{"the host reaches the pod through to-container", envOpts{}, func(t *testing.T, e *env) {
			p := tcp(nodeIP, ipA, 40000, 80, "S")
			p.srcMAC, p.dstMAC = hostMacA, macA
			e.expect(e.toContainer, p.frame(t), actOK)
		}},
		{"the netdev delivers to a local pod", envOpts{}, func(t *testing.T, e *env) {
			out := e.expect(e.fromNetdev, tcp(ipC, ipA, 40000, 80, "S").frame(t), actRedirect)
			if !bytes.Equal(out[0:6], macA) {
				t.Fatalf("dst MAC %x, want %x", out[0:6], macA)
			}
		}},
		{"the netdev leaves the node's own traffic alone", envOpts{}, func(t *testing.T, e *env) {
			e.expect(e.fromNetdev, tcp(remoteIP, nodeIP, 40000, 22, "S").frame(t), actOK)
		}},
		{"the overlay drops packets without a tunnel key", envOpts{}, func(t *testing.T, e *env) {
			e.denied(e.fromOverlay, tcp(ipC, ipA, 40000, 80, "S"), spec.DropNoTunnelKey)
		}},
		{"the overlay takes the source identity from the VNI", envOpts{vni: idC, policyIngress: true}, func(t *testing.T, e *env) {
			// The ipcache says ipD is idD; the VNI says idC, and the VNI wins.
			e.setPolicy(epA, spec.PolicyEntry{Direction: spec.Ingress, Identity: idC, Protocol: 6, Port: 80})
			e.allowed(e.fromOverlay, tcp(ipD, ipA, 40000, 80, "S"))
			evs := e.drain()
			if len(evs) != 1 || evs[0].Type != spec.EventPolicyVerdict || evs[0].SrcIdentity != idC {
				t.Fatalf("events %+v, want an allow verdict for identity %d", evs, idC)
			}
		}},
		{"the overlay accepts a node's own traffic", envOpts{vni: uint32(identity.RemoteNode)}, func(t *testing.T, e *env) {
			e.allowed(e.fromOverlay, tcp(remoteIP, ipA, 40000, 80, "S"))
		}},
	})
	// Anything can reach the VXLAN port: pods through the node's address,
	// hosts outside the cluster. Only nodes may send, and never with an
	// identity that only the receiving node assigns.
	var forged []progCase
	for _, c := range []struct {
		name   string
		src    netip.Addr
		vni    uint32
		reason spec.Reason
	}{
		{"a remote pod's address", ipC, idC, spec.DropUnknownSender},
		{"a local pod's address", ipB, idB, spec.DropUnknownSender},
		{"an unknown address", netip.MustParseAddr("192.168.1.99"), idC, spec.DropUnknownSender},
		{"the world", ipWorld, idC, spec.DropUnknownSender},
		{"this node's own address", nodeIP, idC, spec.DropUnknownSender},
		{"a node claiming host", remoteIP, uint32(identity.Host), spec.DropInvalidIdentity},
		{"a node claiming unmanaged", remoteIP, 3, spec.DropInvalidIdentity},
		{"a node claiming init", remoteIP, 5, spec.DropInvalidIdentity},
		{"a node claiming a node-local CIDR identity", remoteIP, 1<<24 | 7, spec.DropInvalidIdentity},
	} {
		forged = append(forged, progCase{"the overlay drops tunnel packets from " + c.name,
			envOpts{vni: c.vni, tunnelSrc: c.src}, func(t *testing.T, e *env) {
				ev := e.denied(e.fromOverlay, tcp(ipC, ipA, 40000, 80, "S"), c.reason)
				if ev.SrcIdentity != identity.NumericIdentity(c.vni) || ev.Src != ipC {
					t.Fatalf("drop event %+v, want the inner source and the claimed identity", ev)
				}
			}})
	}
	runProgCases(t, forged)
	runProgCases(t, []progCase{
		{"the overlay denies by the VNI identity", envOpts{vni: idD, policyIngress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, spec.PolicyEntry{Direction: spec.Ingress, Identity: idC, Protocol: 6, Port: 80})
			ev := e.denied(e.fromOverlay, tcp(ipC, ipA, 40000, 80, "S"), spec.DropPolicy)
			if ev.SrcIdentity != idD || ev.Direction != spec.Ingress || ev.DstEndpoint != epA {
				t.Fatalf("drop event %+v", ev)
			}
		}},
	})
}
