package datapath

import (
	"bytes"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// With legacy routing the stack carries every unencapsulated packet, so
// that netfilter (kube-proxy) sees both directions of what it translates.
func TestPrivilegedProgLegacyRouting(t *testing.T) {
	legacy := envOpts{legacyRouting: true}
	legacyMasq := envOpts{legacyRouting: true, masquerade: true}
	runProgCases(t, []progCase{
		{"a local pod is reached through the stack, tracked once", legacy, func(t *testing.T, e *env) {
			in := tcp(ipA, ipB, 40000, 80, "S").frame(t)
			out := e.expect(e.fromContainer, in, actOK)
			if !bytes.Equal(out, in) {
				t.Fatal("the packet was changed on its way to the stack")
			}
			conns, err := e.maps.Connections()
			must(t, err)
			if len(conns) != 1 || conns[0].Src != ipA || conns[0].Dst != ipB || conns[0].DstIdentity != idB {
				t.Fatalf("connections %+v, want one A -> B", conns)
			}
		}},
		{"a remote pod in tunnel mode is reached through the stack", envOpts{mode: spec.Tunnel, legacyRouting: true}, func(t *testing.T, e *env) {
			in := tcp(ipA, ipC, 40000, 80, "S").frame(t)
			if out := e.expect(e.fromContainer, in, actOK); !bytes.Equal(out, in) {
				t.Fatal("the packet was changed on its way to the stack")
			}
		}},
		{"the world is masqueraded at the uplink, not at the pod", legacyMasq, func(t *testing.T, e *env) {
			in := tcp(ipA, ipWorld, 40000, 443, "S").frame(t)
			out := e.expect(e.fromContainer, in, actOK)
			if !bytes.Equal(out, in) {
				t.Fatal("from-container translated the packet; the stack must see the pod's address")
			}
			conns, err := e.maps.Connections()
			must(t, err)
			if len(conns) != 1 || conns[0].Masqueraded {
				t.Fatalf("connections %+v: want one, not marked masqueraded (the uplink decides)", conns)
			}
			frame := e.expect(e.toNetdev, out, actOK)
			ip, p := decoded(t, frame)
			sport, _ := ports(p)
			if !ip.SrcIP.Equal(nodeIP.AsSlice()) || !MasqueradePortRange(DefaultEphemeralPorts, DefaultNodePorts).Contains(sport) {
				t.Fatalf("leaves as %v:%d, want the node's address and a masquerade port", ip.SrcIP, sport)
			}
			// The reply is translated back and handed to the stack, whose
			// netfilter undoes its own translations before the pod.
			back := e.expect(e.fromNetdev, tcp(ipWorld, nodeIP, 443, sport, "SA").frame(t), actOK)
			ip, p = decoded(t, back)
			if _, dport := ports(p); !ip.DstIP.Equal(ipA.AsSlice()) || dport != 40000 {
				t.Fatalf("reply to %v:%d, want %v:40000", ip.DstIP, dport, ipA)
			}
		}},
		{"the uplink leaves the cluster and the node's own packets alone", legacyMasq, func(t *testing.T, e *env) {
			for _, p := range []pkt{
				tcp(ipA, ipC, 40000, 80, "S"),         // a remote pod
				tcp(ipA, remoteIP, 40000, 10250, "S"), // a remote node
				tcp(nodeIP, ipWorld, 40000, 443, "S"), // the node itself
			} {
				in := p.frame(t)
				if out := e.expect(e.toNetdev, in, actOK); !bytes.Equal(out, in) {
					t.Fatalf("%v -> %v was translated", p.src, p.dst)
				}
			}
		}},
		{"a reply to a connection from the world is not masqueraded", legacyMasq, func(t *testing.T, e *env) {
			// The API server's pod proxy, say: it connects to the pod,
			// whose to-container tracks the connection; the pod's reply
			// must leave with its own address, or the client resets it.
			e.expect(e.toContainer, tcp(ipWorld, ipA, 40102, 8080, "S").frame(t), actOK)
			reply := tcp(ipA, ipWorld, 8080, 40102, "SA").frame(t)
			out := e.expect(e.fromContainer, reply, actOK)
			if out := e.expect(e.toNetdev, out, actOK); !bytes.Equal(out, reply) {
				ip, p := decoded(t, out)
				sport, _ := ports(p)
				t.Fatalf("the reply leaves as %v:%d, want %v:8080 untouched", ip.SrcIP, sport, ipA)
			}
		}},
		{"a local pod's packet from the network goes to the stack", legacy, func(t *testing.T, e *env) {
			in := tcp(ipC, ipA, 80, 40000, "S").frame(t)
			if out := e.expect(e.fromNetdev, in, actOK); !bytes.Equal(out, in) {
				t.Fatal("the packet was changed on its way to the stack")
			}
		}},
	})
}
