package datapath

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// FuzzPrivilegedPolicy runs random packets of a few flows through endpoint A's
// programs (from-container for what A sends, from-netdev for what remote
// pods and the world send it) under random policies that change while
// connections are open, and checks every verdict, and every drop's
// reason, against policyModel. Conntrack and policy both hold entries
// from the first packet on, so the fuzzer explores how they interact:
// replies that need no rule, policy changes that must close the
// connections the new policy no longer allows and keep the others, TCP
// segments of forgotten connections, overlapping ranges, and denies and
// allows nested in each other across identities.
func FuzzPrivilegedPolicy(f *testing.F) {
	for _, s := range policySeeds() {
		f.Add(s)
	}
	envs := map[spec.RoutingMode]policyFuzzEnv{
		spec.Tunnel: newPolicyFuzzEnv(f, spec.Tunnel),
		spec.Native: newPolicyFuzzEnv(f, spec.Native),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := decodePolicyScenario(data)
		envs[s.mode].check(t, s)
	})
}

// policyFuzzEnv is one env kept for every input: loading programs per
// input would cost more than the input itself.
type policyFuzzEnv struct {
	env *env
	ns  netns.NsHandle // the env's namespace, whose routes the programs see
}

func newPolicyFuzzEnv(f *testing.F, mode spec.RoutingMode) policyFuzzEnv {
	e := newEnv(f, envOpts{mode: mode, policyEgress: true, policyIngress: true})
	ns, err := netns.Get()
	must(f, err)
	f.Cleanup(func() { ns.Close() })
	return policyFuzzEnv{env: e, ns: ns}
}

// check plays the scenario on the datapath and on the model, from empty
// conntrack, and fails at the first packet on which they disagree.
func (pe policyFuzzEnv) check(t *testing.T, s policyScenario) {
	e := *pe.env
	e.t = t
	enterNetNS(t, pe.ns)
	clearConntrack(t, e.maps)
	must(t, e.maps.SetPolicy(epA, s.policy))
	e.drain()

	m := newPolicyModel(s.policy)
	sent := map[[2]int]bool{}
	var history []string
	for i, st := range s.steps {
		if st.policy != nil {
			must(t, e.maps.SetPolicy(epA, st.policy))
			m.setPolicy(st.policy)
			history = append(history, fmt.Sprintf("%d: new policy %v", i, st.policy))
			continue
		}
		p := s.packet(st, sent)
		want := m.packet(p)
		prog := e.fromNetdev
		if p.src == ipA {
			prog = e.fromContainer
		}
		verdict, _ := e.run(prog, p.frame(t))
		var drops []spec.Event
		for _, ev := range e.drain() {
			if ev.Type == spec.EventDrop {
				drops = append(drops, ev)
			}
		}
		history = append(history, fmt.Sprintf("%d: %s: %s", i, describePacket(p), want))
		dropped := verdict == actShot
		if dropped == want.pass || (dropped && (len(drops) != 1 || drops[0].Reason != want.reason)) ||
			(!dropped && len(drops) != 0) {
			t.Fatalf("mode %v, step %d, %s: verdict %d, drop events %+v; model wants %s\nthe model after it: %s\nsteps (with the model's verdicts):\n%s",
				s.mode, i, describePacket(p), verdict, drops, want, m, strings.Join(history, "\n"))
		}
	}
}

// enterNetNS moves the test's goroutine, locked to its thread, into ns
// until the test ends.
func enterNetNS(t *testing.T, ns netns.NsHandle) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("current netns: %v", err)
	}
	if err := netns.Set(ns); err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatalf("enter netns: %v", err)
	}
	t.Cleanup(func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("restore netns: %v", err) // the thread stays locked and is discarded
			return
		}
		orig.Close()
		runtime.UnlockOSThread()
	})
}

func clearConntrack(t *testing.T, m *Maps) {
	var keys []CTKey
	var k CTKey
	var v CTEntry
	it := m.CT4.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	must(t, it.Err())
	for _, k := range keys {
		must(t, m.CT4.Delete(&k))
	}
}

// The seed builders write what decodePolicyScenario reads.

func seedInput(mode spec.RoutingMode, flows [][]byte, policy []byte, steps ...[]byte) []byte {
	out := []byte{0, byte(len(flows) - 1)}
	if mode == spec.Native {
		out[0] = 1
	}
	out = append(out, slices.Concat(flows...)...)
	out = append(out, policy...)
	return append(out, slices.Concat(steps...)...)
}

func seedFlow(ingress bool, peer netip.Addr, proto uint8, client, server uint16) []byte {
	a := byte(mustIndex(fuzzPeers[:], peer))<<1 | byte(mustIndex(fuzzFlowProtocols[:], proto))<<3
	if ingress {
		a |= 1
	}
	return []byte{a, byte(mustIndex(fuzzPorts[:], client))<<4 | byte(mustIndex(fuzzPorts[:], server))}
}

func seedPolicy(rules ...[]byte) []byte {
	return append([]byte{byte(len(rules) - 1)}, slices.Concat(rules...)...)
}

// seedRule is a rule for all ports with no port, one port, or a range.
func seedRule(dir spec.Direction, deny bool, id uint32, proto uint8, ports ...uint16) []byte {
	a := byte(mustIndex(fuzzRuleIdentities[:], identity.NumericIdentity(id)))<<2 | byte(mustIndex(fuzzRuleProtocols[:], proto))<<4
	if dir == spec.Ingress {
		a |= 1
	}
	if deny {
		a |= 2
	}
	list := fuzzPorts[:]
	if proto == spec.ProtoICMP {
		list = fuzzICMPTypes[:]
	}
	var b, c byte
	switch len(ports) {
	case 1:
		b = 1 | byte(mustIndex(list, ports[0]))<<4
	case 2:
		b, c = 2|byte(mustIndex(list, ports[0]))<<4, byte(mustIndex(list, ports[1]))
	}
	return []byte{a, b, c}
}

// seedSend is a packet of flow from its client or its server.
func seedSend(flow int, fromServer bool, flags byte) []byte {
	op := byte(flow) | flags<<4
	if fromServer {
		op |= 8
	}
	return []byte{op}
}

func seedChange(policy []byte) []byte {
	return append([]byte{policyChangeOp}, policy...)
}

func mustIndex[T comparable](list []T, v T) int {
	if i := slices.Index(list, v); i >= 0 {
		return i
	}
	panic(fmt.Sprintf("%v is not in %v", v, list))
}

// policySeeds start the fuzzer where the datapath has the most to get
// right. The comments say what the model expects.
func policySeeds() [][]byte {
	const allow, deny = false, true
	const client, server = false, true
	natural := flagsNatural
	handshake := func(flow int) []byte {
		return slices.Concat(seedSend(flow, client, natural), seedSend(flow, server, natural), seedSend(flow, client, natural))
	}
	exchange := func(flow int) []byte {
		return slices.Concat(seedSend(flow, client, natural), seedSend(flow, server, natural))
	}
	return [][]byte{
		// Overlapping egress ranges: a deny nested in an allow (80 in
		// 1-1023: dropped), an allow nested in a deny of the same identity
		// (D 81 in D 81-88: dropped, although any identity may use 79-96),
		// and a block edge (96) allowed only by the rule for any identity.
		seedInput(spec.Tunnel,
			[][]byte{
				seedFlow(false, ipC, spec.ProtoTCP, 40000, 80),
				seedFlow(false, ipC, spec.ProtoTCP, 40001, 81),
				seedFlow(false, ipD, spec.ProtoTCP, 40000, 81),
				seedFlow(false, ipWorld, spec.ProtoTCP, 40001, 95),
				seedFlow(false, ipD, spec.ProtoTCP, 40000, 96),
			},
			seedPolicy(
				seedRule(spec.Egress, allow, idC, spec.ProtoTCP, 1, 1023),
				seedRule(spec.Egress, deny, idC, spec.ProtoTCP, 80),
				seedRule(spec.Egress, allow, uint32(identity.Unknown), spec.ProtoTCP, 79, 96),
				seedRule(spec.Egress, deny, idD, spec.ProtoTCP, 81, 88),
				seedRule(spec.Egress, allow, idD, spec.ProtoTCP, 81),
			),
			handshake(0), handshake(1), handshake(2), handshake(3), handshake(4)),

		// Denies for any identity over allows for one: C's UDP 53 is
		// denied, C's 8080 allowed; D may send anything in; the world's
		// 1024 is denied inside an allowed range; C's packets towards A's
		// port 5000 are new ingress connections, whichever flow sends them.
		seedInput(spec.Native,
			[][]byte{
				seedFlow(false, ipC, spec.ProtoUDP, 5000, 53),
				seedFlow(false, ipC, spec.ProtoUDP, 5000, 8080),
				seedFlow(true, ipD, spec.ProtoUDP, 40000, 53),
				seedFlow(true, ipWorld, spec.ProtoUDP, 40000, 1024),
				seedFlow(true, ipC, spec.ProtoUDP, 53, 5000),
			},
			seedPolicy(
				seedRule(spec.Egress, deny, uint32(identity.Unknown), spec.ProtoUDP, 1, 1023),
				seedRule(spec.Egress, allow, idC, spec.ProtoUDP),
				seedRule(spec.Egress, allow, idC, spec.ProtoUDP, 53),
				seedRule(spec.Ingress, allow, uint32(identity.Unknown), spec.ProtoUDP, 1023, 1024),
				seedRule(spec.Ingress, deny, uint32(identity.World), spec.ProtoUDP, 1024),
				seedRule(spec.Ingress, allow, idD, 0),
				seedRule(spec.Ingress, deny, idD, spec.ProtoUDP, 40000, 65535),
			),
			seedSend(0, client, natural), exchange(1), exchange(2), seedSend(3, client, natural),
			seedSend(4, client, natural), seedSend(0, server, natural)),

		// A policy change with established flows both ways: the ones it
		// still allows go on; TCP it no longer allows drops as unknown from
		// both ends and its new SYN by policy; UDP and echoes it no longer
		// allows are judged as new from whichever end sends. Changing back
		// reopens them.
		func() []byte {
			flows := [][]byte{
				seedFlow(false, ipC, spec.ProtoTCP, 40000, 80),
				seedFlow(false, ipC, spec.ProtoUDP, 5000, 53),
				seedFlow(true, ipD, spec.ProtoTCP, 40001, 443),
				seedFlow(true, ipD, spec.ProtoUDP, 40000, 53),
				seedFlow(false, ipWorld, spec.ProtoICMP, 40000, 1),
			}
			before := seedPolicy(
				seedRule(spec.Egress, allow, idC, spec.ProtoTCP, 80),
				seedRule(spec.Egress, allow, idC, spec.ProtoUDP, 53),
				seedRule(spec.Ingress, allow, idD, spec.ProtoTCP, 443),
				seedRule(spec.Ingress, allow, idD, spec.ProtoUDP, 1, 1023),
				seedRule(spec.Egress, allow, uint32(identity.World), spec.ProtoICMP, 8),
			)
			after := seedPolicy(
				seedRule(spec.Egress, allow, idC, spec.ProtoTCP, 80),
				seedRule(spec.Ingress, allow, idD, spec.ProtoUDP, 53),
				seedRule(spec.Ingress, deny, idD, spec.ProtoTCP, 443),
			)
			return seedInput(spec.Tunnel, flows, before,
				handshake(0), exchange(1), handshake(2), exchange(3), exchange(4),
				seedChange(after),
				exchange(0), exchange(1), exchange(2), seedSend(2, client, flagsSYN), exchange(3), exchange(4),
				seedChange(before),
				seedSend(2, client, flagsSYN), seedSend(2, server, flagsSYNACK), exchange(4), exchange(1))
		}(),

		// SCTP and ICMP with nested denies: SCTP 80 denied under an allow
		// for all SCTP; D's echo requests in denied (3-11 covers 8) under
		// an allow for all ICMP; A's echo to D allowed by 7-9 next to a
		// deny of 9-255. After the change, D's echo reply to A's request,
		// no longer tracked, starts an ingress connection (type 0).
		func() []byte {
			flows := [][]byte{
				seedFlow(false, ipC, spec.ProtoSCTP, 5000, 80),
				seedFlow(false, ipC, spec.ProtoSCTP, 5000, 81),
				seedFlow(true, ipD, spec.ProtoICMP, 40000, 1),
				seedFlow(false, ipD, spec.ProtoICMP, 40001, 1),
				seedFlow(true, ipWorld, spec.ProtoSCTP, 40000, 1024),
			}
			before := seedPolicy(
				seedRule(spec.Egress, allow, idC, spec.ProtoSCTP),
				seedRule(spec.Egress, deny, idC, spec.ProtoSCTP, 80),
				seedRule(spec.Ingress, allow, uint32(identity.Unknown), spec.ProtoICMP),
				seedRule(spec.Ingress, deny, idD, spec.ProtoICMP, 3, 11),
				seedRule(spec.Egress, allow, idD, spec.ProtoICMP, 7, 9),
				seedRule(spec.Egress, deny, uint32(identity.Unknown), spec.ProtoICMP, 9, 255),
				seedRule(spec.Ingress, allow, uint32(identity.World), spec.ProtoSCTP, 1023, 1024),
				seedRule(spec.Ingress, deny, uint32(identity.Unknown), spec.ProtoSCTP, 5000, 8080),
			)
			after := seedPolicy(
				seedRule(spec.Ingress, allow, uint32(identity.Unknown), spec.ProtoICMP),
				seedRule(spec.Egress, allow, idC, spec.ProtoSCTP, 81),
			)
			return seedInput(spec.Tunnel, flows, before,
				seedSend(0, client, natural), exchange(1), seedSend(2, client, natural), exchange(3), exchange(4),
				seedChange(after),
				seedSend(3, server, natural), seedSend(3, client, natural), exchange(2), exchange(1), exchange(0),
				seedChange(after),
				seedSend(3, client, natural), exchange(4))
		}(),

		// The world comes in through the uplink; a deny nested in an allow
		// of every protocol; two flows that are one connection (C:80 and
		// A:8080 both ways, with the low port on the client, so the lookup
		// guesses the direction wrong). After a deny of everything coming
		// in, the ingress connections are gone and A's own SYN to C:80 is
		// judged by egress policy.
		func() []byte {
			flows := [][]byte{
				seedFlow(true, ipWorld, spec.ProtoTCP, 40000, 443),
				seedFlow(true, ipWorld, spec.ProtoTCP, 40000, 1024),
				seedFlow(false, ipWorld, spec.ProtoUDP, 5000, 53),
				seedFlow(true, ipC, spec.ProtoTCP, 80, 8080),
				seedFlow(false, ipC, spec.ProtoTCP, 8080, 80),
			}
			return seedInput(spec.Native, flows,
				seedPolicy(
					seedRule(spec.Ingress, allow, uint32(identity.World), 0),
					seedRule(spec.Ingress, deny, uint32(identity.World), spec.ProtoTCP, 1023, 1024),
					seedRule(spec.Egress, allow, uint32(identity.World), spec.ProtoUDP, 53),
					seedRule(spec.Ingress, allow, idC, spec.ProtoTCP, 8080),
				),
				handshake(0), seedSend(1, client, natural), exchange(2),
				seedSend(3, client, natural), seedSend(4, client, natural), seedSend(3, client, natural), seedSend(4, server, natural),
				seedChange(seedPolicy(
					seedRule(spec.Ingress, deny, uint32(identity.Unknown), 0),
					seedRule(spec.Egress, allow, uint32(identity.World), spec.ProtoUDP, 53),
				)),
				seedSend(0, client, natural), seedSend(4, client, natural), seedSend(4, client, flagsSYN),
				exchange(2), seedSend(0, server, flagsRST))
		}(),

		// An echo reply with no connection starts one (type 0). Under a
		// new policy that allows only echo requests (type 8) in, SetPolicy
		// forgets it, and D's next reply is judged again and drops.
		seedInput(spec.Tunnel,
			[][]byte{seedFlow(false, ipD, spec.ProtoICMP, 40001, 1)},
			seedPolicy(seedRule(spec.Ingress, allow, uint32(identity.Unknown), spec.ProtoICMP)),
			seedSend(0, server, natural),
			seedChange(seedPolicy(seedRule(spec.Ingress, allow, uint32(identity.Unknown), spec.ProtoICMP, 8))),
			seedSend(0, server, natural), seedSend(0, client, natural)),

		// The ends of the port space: a range to 65535 with a deny at its
		// top, a range from 1, ports at block edges, FIN and RST.
		seedInput(spec.Tunnel,
			[][]byte{
				seedFlow(false, ipC, spec.ProtoTCP, 80, 65535),
				seedFlow(false, ipC, spec.ProtoTCP, 40000, 1),
				seedFlow(true, ipC, spec.ProtoUDP, 5000, 1023),
				seedFlow(true, ipC, spec.ProtoUDP, 5000, 1024),
				seedFlow(true, ipC, spec.ProtoUDP, 5000, 1),
			},
			seedPolicy(
				seedRule(spec.Egress, allow, idC, spec.ProtoTCP, 1, 65535),
				seedRule(spec.Egress, deny, idC, spec.ProtoTCP, 40000, 65535),
				seedRule(spec.Ingress, allow, idC, spec.ProtoUDP, 1023, 1024),
				seedRule(spec.Ingress, deny, uint32(identity.Unknown), spec.ProtoUDP, 1, 53),
			),
			handshake(0), handshake(1), seedSend(1, client, flagsFINACK), seedSend(1, server, flagsFINACK),
			seedSend(1, client, natural), seedSend(1, server, flagsRST),
			exchange(2), exchange(3), exchange(4)),
	}
}
