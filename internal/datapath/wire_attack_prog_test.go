package datapath

import (
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// The host identity is never taken from the wire: a packet from the
// uplink or the tunnel claiming the node's address, or one of its pods',
// is spoofed, whichever way it would have gone (straight into a pod,
// through a NodePort, or to the stack, which could forward it into the
// tunnel with the pod's identity). An address the ipcache names as the
// host's but that is not the node's main one is judged as the world.
func TestPrivilegedProgHostIdentityNotFromWire(t *testing.T) {
	hostOnly := envOpts{policyIngress: true}
	otherHostIP := netip.MustParseAddr("192.168.1.3")
	cases := []progCase{
		{"the node's address into a pod", hostOnly, func(t *testing.T, e *env) {
			e.setPolicy(epA, ingressRule(uint32(identity.Host), 0, 0, 0))
			// The node's own packet to A comes through the stack: host.
			e.allowed(e.toContainer, tcp(nodeIP, ipA, 40000, 80, "S"))
			ev := e.denied(e.fromNetdev, outside(tcp(nodeIP, ipA, 40001, 80, "S")), spec.DropInvalidSource)
			if ev.SrcIdentity != identity.World {
				t.Fatalf("drop names identity %v, want world", ev.SrcIdentity)
			}
		}},
		{"the node's address through a NodePort", envOpts{}, func(t *testing.T, e *env) {
			e.serve(npTCP, spec.LBNodePort, beA)
			e.denied(e.fromNetdev, outside(tcp(nodeIP, nodeIP, 40000, npTCP.Port, "S")), spec.DropInvalidSource)
		}},
		{"a local pod's address into another pod", envOpts{policyIngress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, ingressRule(idB, 0, 0, 0))
			e.denied(e.fromNetdev, outside(tcp(ipB, ipA, 40000, 80, "S")), spec.DropInvalidSource)
		}},
		{"a local pod's address into a connection between local pods", envOpts{}, func(t *testing.T, e *env) {
			e.allowed(e.fromContainer, tcp(ipA, ipB, 40000, 80, "S"))
			e.denied(e.fromNetdev, outside(tcp(ipB, ipA, 80, 40000, "SA")), spec.DropInvalidSource)
			e.denied(e.fromNetdev, outside(tcp(ipA, ipB, 40000, 80, "A")), spec.DropInvalidSource)
			// A remote pod's connection to A is judged as usual.
			e.allowed(e.fromNetdev, outside(tcp(ipC, ipA, 40001, 80, "S")))
			e.allowed(e.fromNetdev, outside(tcp(ipC, ipA, 40001, 80, "A")))
		}},
		{"a local pod's address to the stack", envOpts{mode: spec.Tunnel}, func(t *testing.T, e *env) {
			e.denied(e.fromNetdev, outside(tcp(ipA, ipC, 40000, 80, "S")), spec.DropInvalidSource)
		}},
		{"a local pod's address with legacy routing", envOpts{legacyRouting: true}, func(t *testing.T, e *env) {
			e.denied(e.fromNetdev, outside(tcp(ipB, ipA, 40000, 80, "S")), spec.DropInvalidSource)
		}},
		{"a local pod's address from the tunnel", envOpts{vni: idC, policyIngress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, ingressRule(idC, 0, 0, 0))
			e.denied(e.fromOverlay, tcp(ipB, ipA, 40000, 80, "S"), spec.DropInvalidSource)
			e.denied(e.fromOverlay, tcp(nodeIP, ipA, 40000, 80, "S"), spec.DropInvalidSource)
		}},
		{"another host address is the world", hostOnly, func(t *testing.T, e *env) {
			must(t, e.maps.UpsertIPCache(netip.PrefixFrom(otherHostIP, 32), spec.IPCacheEntry{Identity: identity.Host}))
			e.setPolicy(epA, ingressRule(uint32(identity.Host), 0, 0, 0))
			ev := e.denied(e.fromNetdev, outside(tcp(otherHostIP, ipA, 40000, 80, "S")), spec.DropPolicy)
			if ev.SrcIdentity != identity.World {
				t.Fatalf("drop names identity %v, want world", ev.SrcIdentity)
			}
			e.setPolicy(epA, ingressRule(uint32(identity.World), 0, 0, 0))
			e.allowed(e.fromNetdev, outside(tcp(otherHostIP, ipA, 40001, 80, "S")))
		}},
		{"another host address through a NodePort is the world", envOpts{policyIngress: true}, func(t *testing.T, e *env) {
			must(t, e.maps.UpsertIPCache(netip.PrefixFrom(otherHostIP, 32), spec.IPCacheEntry{Identity: identity.Host}))
			e.setPolicy(epA, ingressRule(uint32(identity.Host), 0, 0, 0))
			e.serve(npTCP, spec.LBNodePort, beA)
			ev := e.denied(e.fromNetdev, outside(tcp(otherHostIP, nodeIP, 40000, npTCP.Port, "S")), spec.DropPolicy)
			if ev.SrcIdentity != identity.World {
				t.Fatalf("drop names identity %v, want world", ev.SrcIdentity)
			}
		}},
	}
	for _, c := range []struct {
		name string
		id   identity.NumericIdentity
	}{{"init", identity.Init}, {"unmanaged", identity.Unmanaged}} {
		cases = append(cases, progCase{"an address of identity " + c.name + " is the world", hostOnly, func(t *testing.T, e *env) {
			must(t, e.maps.UpsertIPCache(netip.PrefixFrom(otherHostIP, 32), spec.IPCacheEntry{Identity: c.id}))
			e.setPolicy(epA, ingressRule(uint32(c.id), 0, 0, 0))
			ev := e.denied(e.fromNetdev, outside(tcp(otherHostIP, ipA, 40000, 80, "S")), spec.DropPolicy)
			if ev.SrcIdentity != identity.World {
				t.Fatalf("drop names identity %v, want world", ev.SrcIdentity)
			}
		}})
	}
	runProgCases(t, cases)
}

// The fragment table is written only once the sender is trusted: a
// pod's forged first fragment (another sender's address), or one that
// a forged tunnel packet carries, leaves no entry that the other
// sender's later fragments would take their ports from.
func TestPrivilegedProgForgedFirstFragment(t *testing.T) {
	forgedFirst := func(src netip.Addr) pkt {
		p := udp(src, ipC, 5000, 53)
		p.ipID, p.moreFrags = 4242, true
		return p
	}
	empty := func(t *testing.T, e *env) {
		t.Helper()
		var k lxcFrag4Key
		var v lxcFragPorts
		if e.maps.Frag4.Iterate().Next(&k, &v) {
			t.Fatalf("the forged fragment left an entry: %+v -> %+v", k, v)
		}
	}
	runProgCases(t, []progCase{
		{"a pod spoofing another pod", envOpts{}, func(t *testing.T, e *env) {
			e.denied(e.fromContainer, forgedFirst(ipB), spec.DropInvalidSource)
			empty(t, e)
			// B's own later fragment of that datagram finds no ports.
			later := udp(ipB, ipC, 0, 0)
			later.ipID, later.fragOffset = 4242, 4
			e.denied(e.fromNetdev, outside(later), spec.DropInvalidSource)
			// A's own first fragment is recorded.
			e.allowed(e.fromContainer, forgedFirst(ipA))
			var k lxcFrag4Key
			var v lxcFragPorts
			if !e.maps.Frag4.Iterate().Next(&k, &v) || v.Dport != htons(53) {
				t.Fatalf("A's first fragment not recorded: %+v", v)
			}
		}},
		{"a pod spoofing the world", envOpts{}, func(t *testing.T, e *env) {
			e.denied(e.fromContainer, forgedFirst(ipWorld), spec.DropInvalidSource)
			empty(t, e)
		}},
		{"a tunnel packet from an unknown sender", envOpts{vni: idC, tunnelSrc: ipWorld}, func(t *testing.T, e *env) {
			p := udp(ipC, ipA, 5000, 53)
			p.ipID, p.moreFrags = 4243, true
			e.denied(e.fromOverlay, p, spec.DropUnknownSender)
			empty(t, e)
		}},
	})
}
