package datapath

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

const (
	tcpProto  = 6
	udpProto  = 17
	icmpProto = 1
)

func egress(id uint32, proto uint8, port, end uint16) spec.PolicyEntry {
	return spec.PolicyEntry{Direction: spec.Egress, Identity: identity.NumericIdentity(id), Protocol: proto, Port: port, EndPort: end}
}

func ingressRule(id uint32, proto uint8, port, end uint16) spec.PolicyEntry {
	return spec.PolicyEntry{Direction: spec.Ingress, Identity: identity.NumericIdentity(id), Protocol: proto, Port: port, EndPort: end}
}

func denyRule(e spec.PolicyEntry) spec.PolicyEntry {
	e.Deny = true
	return e
}

func TestPrivilegedProgPolicy(t *testing.T) {
	enforce := envOpts{policyEgress: true, mode: spec.Tunnel}
	runProgCases(t, []progCase{
		{"exact rule allows its port", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
		}},
		{"SCTP ports are matched", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, spec.ProtoSCTP, 0, 0), denyRule(egress(idC, spec.ProtoSCTP, 80, 0)),
				egress(idD, spec.ProtoSCTP, 3868, 3870))
			e.allowed(e.fromContainer, sctp(ipA, ipC, 5000, 81))
			e.denied(e.fromContainer, sctp(ipA, ipC, 5000, 80), spec.DropPolicyDeny)
			e.allowed(e.fromContainer, sctp(ipA, ipD, 5000, 3869))
			e.denied(e.fromContainer, sctp(ipA, ipD, 5000, 3871), spec.DropPolicy)
			// Replies follow the tracked association.
			e.allowed(e.fromNetdev, sctp(ipC, ipA, 81, 5000))
		}},
		{"a SYN reopening a closed connection's tuple is judged by the policy of now", enforce, func(t *testing.T, e *env) {
			toC := spec.PolicyGroup{EndpointID: epA, Direction: spec.Egress, Identity: idC}
			setGroup := func(entries ...spec.PolicyEntry) {
				t.Helper()
				_, err := e.maps.UpdatePolicy(epA, map[spec.PolicyGroup][]spec.PolicyEntry{toC: entries})
				must(t, err)
			}
			setGroup(egress(idC, tcpProto, 80, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "FA"))
			setGroup()                                                // no longer allowed, not flushed yet
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A")) // the closing connection's last ACK
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), spec.DropPolicy)
			// Allowed again, the new connection replaces the old entry.
			setGroup(egress(idC, tcpProto, 80, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.allowed(e.fromNetdev, tcp(ipC, ipA, 80, 40000, "SA"))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"))
		}},
		// Proves writing by group: a group changes alone, and a group
		// that narrows has its established connections forgotten.
		{"policy groups change alone, and a narrowed one stops its connections", enforce, func(t *testing.T, e *env) {
			toC := spec.PolicyGroup{EndpointID: epA, Direction: spec.Egress, Identity: idC}
			toD := spec.PolicyGroup{EndpointID: epA, Direction: spec.Egress, Identity: idD}
			setGroup := func(g spec.PolicyGroup, wantNarrowed bool, entries ...spec.PolicyEntry) {
				t.Helper()
				narrowed, err := e.maps.UpdatePolicy(g.EndpointID, map[spec.PolicyGroup][]spec.PolicyEntry{g: entries})
				must(t, err)
				if narrowed != wantNarrowed {
					t.Fatalf("group %+v narrowed %v, want %v", g, narrowed, wantNarrowed)
				}
			}
			setGroup(toC, false, egress(idC, tcpProto, 80, 90), denyRule(egress(idC, tcpProto, 85, 0)))
			setGroup(toD, false, egress(idD, udpProto, 53, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40001, 85, "S"), spec.DropPolicyDeny)
			e.allowed(e.fromContainer, udp(ipA, ipD, 40002, 53))
			if _, err := e.maps.UpdatePolicy(epA, map[spec.PolicyGroup][]spec.PolicyEntry{toC: {egress(idD, tcpProto, 80, 0)}}); err == nil {
				t.Fatal("an entry of another group was written")
			}
			setGroup(toC, false, egress(idC, tcpProto, 80, 90), egress(idC, tcpProto, 443, 0)) // wider
			setGroup(toC, true, egress(idC, tcpProto, 443, 0))                                 // narrower
			e.allowed(e.fromContainer, udp(ipA, ipD, 40003, 53))                               // D untouched
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"))                          // until flushed
			must(t, e.maps.FlushDisallowed(epA))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "A"), spec.DropUnknownCT) // forgotten
			e.allowed(e.fromContainer, udp(ipA, ipD, 40002, 53))                         // still allowed: kept
			// A full sync repairs what the index does not know.
			stray := PolicyKey{Prefixlen: policyPrefixFull, Identity: 4242, EpId: epA, Direction: uint8(spec.Egress)}
			mp, err := e.maps.policyMapOf(epA)
			must(t, err)
			must(t, mp.Put(&stray, &PolicyValue{}))
			mp.Close()
			narrowed, err := e.maps.SyncPolicy(map[spec.PolicyGroup][]spec.PolicyEntry{toC: {egress(idC, tcpProto, 443, 0)}})
			must(t, err)
			if !slices.Equal(narrowed, []uint16{epA}) {
				t.Fatalf("sync narrowed %v, want [%d]", narrowed, epA)
			}
			state, err := e.maps.PolicyState(epA)
			must(t, err)
			want, _ := PolicyMapState(epA, []spec.PolicyEntry{egress(idC, tcpProto, 443, 0)})
			if !maps.Equal(state, want) {
				t.Fatalf("after sync the map holds %v, want %v", state, want)
			}
		}},
		// Proves the cookie: a verdict names the entry that decided it,
		// a deny's (also for the allow nested in it), an allow's, or
		// none for the default drop; the drop after a deny says it too.
		{"verdict events carry the deciding entry's cookie", enforce, func(t *testing.T, e *env) {
			allow := egress(idC, tcpProto, 80, 90)
			allow.Cookie = 11
			deny := denyRule(egress(idC, tcpProto, 85, 0))
			deny.Cookie = 12
			any := egress(uint32(identity.Unknown), udpProto, 53, 0)
			any.Cookie = 13
			e.setPolicy(epA, allow, deny, any)
			verdictCookie := func(p pkt) (uint32, []uint32) {
				t.Helper()
				e.run(e.fromContainer, p.frame(t))
				var verdict uint32
				var drops []uint32
				for _, ev := range e.drain() {
					switch ev.Type {
					case spec.EventPolicyVerdict:
						verdict = ev.PolicyCookie
					case spec.EventDrop:
						drops = append(drops, ev.PolicyCookie)
					}
				}
				return verdict, drops
			}
			for _, c := range []struct {
				p            pkt
				verdict      uint32
				dropsWithOne bool
			}{
				{tcp(ipA, ipC, 40000, 80, "S"), 11, false},
				{tcp(ipA, ipC, 40001, 85, "S"), 12, true},
				{udp(ipA, ipD, 40002, 53), 13, false},
				{tcp(ipA, ipC, 40003, 99, "S"), 0, true},
			} {
				v, drops := verdictCookie(c.p)
				if v != c.verdict || (c.dropsWithOne && !slices.Equal(drops, []uint32{c.verdict})) || (!c.dropsWithOne && len(drops) > 0) {
					t.Errorf("%s: verdict cookie %d, drops %v; want %d (a drop: %v)", describePacket(c.p), v, drops, c.verdict, c.dropsWithOne)
				}
			}
		}},
		{"exact rule denies other ports", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 81, "S"), spec.DropPolicy)
		}},
		{"exact rule denies other identities", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			e.denied(e.fromContainer, tcp(ipA, ipD, 40000, 80, "S"), spec.DropPolicy)
		}},
		{"wildcard identity", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(uint32(identity.Unknown), tcpProto, 80, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.allowed(e.fromContainer, tcp(ipA, ipD, 40000, 80, "S"))
			e.allowed(e.fromContainer, tcp(ipA, ipWorld, 40000, 80, "S"))
			e.denied(e.fromContainer, tcp(ipA, ipD, 40000, 81, "S"), spec.DropPolicy)
		}},
		{"wildcard port", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 0, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 12345, "S"))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 1, "S"))
			e.denied(e.fromContainer, udp(ipA, ipC, 40000, 53), spec.DropPolicy)
		}},
		{"wildcard protocol", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, 0, 0, 0))
			e.allowed(e.fromContainer, udp(ipA, ipC, 40000, 53))
			e.allowed(e.fromContainer, echo(ipA, ipC, 7, false))
			e.denied(e.fromContainer, udp(ipA, ipD, 40000, 53), spec.DropPolicy)
		}},
		{"port range", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 8000, 8080))
			for _, port := range []uint16{8000, 8001, 8042, 8079, 8080} {
				e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, port, "S"))
			}
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 7999, "S"), spec.DropPolicy)
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 8081, "S"), spec.DropPolicy)
		}},
		{"IP options do not hide the ports", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0))
			allowed := tcp(ipA, ipC, 40000, 80, "S")
			allowed.ipOptions = true
			if ihl := allowed.frame(t)[14] & 0x0f; ihl != 6 {
				t.Fatalf("IHL %d, want 6", ihl)
			}
			e.allowed(e.fromContainer, allowed)
			denied := tcp(ipA, ipC, 40000, 81, "S")
			denied.ipOptions = true
			e.denied(e.fromContainer, denied, spec.DropPolicy)
		}},
		{"ICMP rules match the type", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, icmpProto, 8, 0))
			e.allowed(e.fromContainer, echo(ipA, ipC, 7, false))
			p := echo(ipA, ipC, 7, false)
			p.icmpType = 13 // timestamp request
			e.denied(e.fromContainer, p, spec.DropPolicy)
		}},
		{"a wildcard-identity deny beats an exact allow", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 80, 0), denyRule(egress(uint32(identity.Unknown), 0, 0, 0)))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), spec.DropPolicyDeny)
		}},
		{"a broad deny beats a narrower allow", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, denyRule(egress(idC, tcpProto, 0, 0)), egress(idC, tcpProto, 80, 0))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), spec.DropPolicyDeny)
		}},
		{"a deny inside an allowed range", enforce, func(t *testing.T, e *env) {
			e.setPolicy(epA, egress(idC, tcpProto, 1, 1000), denyRule(egress(idC, tcpProto, 80, 0)))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), spec.DropPolicyDeny)
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 81, "S"))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 79, "S"))
		}},
		{"enforcement with no entry drops", enforce, func(t *testing.T, e *env) {
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), spec.DropPolicy)
		}},
		{"enforcement off allows everything", envOpts{mode: spec.Tunnel}, func(t *testing.T, e *env) {
			e.setPolicy(epA, denyRule(egress(idD, 0, 0, 0))) // entries do not matter when off
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.allowed(e.fromContainer, udp(ipA, ipD, 40000, 53))
		}},
		{"a local peer's ingress policy applies on the sender's node", envOpts{ingressB: true}, func(t *testing.T, e *env) {
			ev := e.denied(e.fromContainer, tcp(ipA, ipB, 40000, 80, "S"), spec.DropPolicy)
			if ev.Direction != spec.Ingress || ev.DstEndpoint != epB {
				t.Fatalf("drop event %+v, want ingress of endpoint %d", ev, epB)
			}
			e.setPolicy(epB, spec.PolicyEntry{Direction: spec.Ingress, Identity: idA, Protocol: tcpProto, Port: 80})
			e.allowed(e.fromContainer, tcp(ipA, ipB, 40001, 80, "S"))
		}},
		{"ingress from the network uses the ipcache identity", envOpts{policyIngress: true}, func(t *testing.T, e *env) {
			e.setPolicy(epA, spec.PolicyEntry{Direction: spec.Ingress, Identity: idC, Protocol: udpProto, Port: 53})
			e.allowed(e.fromNetdev, udp(ipC, ipA, 5000, 53))
			e.denied(e.fromNetdev, udp(ipD, ipA, 5000, 53), spec.DropPolicy)
		}},
		// Proves the third lookup: a pod's address inside an ipBlock is
		// judged by the block's identity too, allow or deny.
		{"a peer's CIDR identity is judged beside its own", envOpts{policyIngress: true, policyEgress: true}, func(t *testing.T, e *env) {
			const block = identity.LocalIdentityFlag | 7
			must(t, e.maps.UpsertIPCache(netip.PrefixFrom(ipC, 32), spec.IPCacheEntry{Identity: idC, CIDRIdentity: block}))
			e.denied(e.fromNetdev, udp(ipC, ipA, 5000, 53), spec.DropPolicy)
			e.setPolicy(epA, spec.PolicyEntry{Direction: spec.Ingress, Identity: block, Protocol: udpProto, Port: 53},
				spec.PolicyEntry{Direction: spec.Egress, Identity: block})
			e.allowed(e.fromNetdev, udp(ipC, ipA, 5001, 53))
			e.denied(e.fromNetdev, udp(ipD, ipA, 5000, 53), spec.DropPolicy) // no block identity
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.denied(e.fromContainer, tcp(ipA, ipD, 40000, 80, "S"), spec.DropPolicy)
			// A deny of the block wins over an allow of the pod.
			e.setPolicy(epA, spec.PolicyEntry{Direction: spec.Ingress, Identity: idC},
				spec.PolicyEntry{Direction: spec.Ingress, Identity: block, Deny: true})
			e.denied(e.fromNetdev, udp(ipC, ipA, 5002, 53), spec.DropPolicyDeny)
		}},
		{"ingress from the host is judged by to-container", envOpts{policyIngress: true}, func(t *testing.T, e *env) {
			p := tcp(nodeIP, ipA, 40000, 80, "S")
			e.denied(e.toContainer, p, spec.DropPolicy)
			e.setPolicy(epA, spec.PolicyEntry{Direction: spec.Ingress, Identity: identity.Host})
			e.allowed(e.toContainer, p)
		}},
	})
}

// Each endpoint's policy is a map of its own, sized by
// --bpf-policy-map-max (8 here): a policy larger than that is refused
// whole, the old one staying in force; an update whose fullest moment
// does not fit in place swaps in a new map at once; and one endpoint's
// full map leaves the others' alone.
func TestPrivilegedProgPolicyMapFull(t *testing.T) {
	small := envOpts{policyEgress: true, mode: spec.Tunnel, policyMapMax: 8}
	ports := func(id uint32, deny bool, from, to uint16) []spec.PolicyEntry {
		var out []spec.PolicyEntry
		for p := from; p <= to; p++ {
			e := egress(id, tcpProto, p, 0)
			e.Deny = deny
			out = append(out, e)
		}
		return out
	}
	runProgCases(t, []progCase{
		{"a policy larger than the map is refused whole", small, func(t *testing.T, e *env) {
			old := []spec.PolicyEntry{egress(idC, tcpProto, 80, 0), denyRule(egress(idD, tcpProto, 22, 0)), egress(idD, 0, 0, 0)}
			e.setPolicy(epA, old...)
			before, err := e.maps.PolicyState(epA)
			must(t, err)
			next := append(ports(idC, false, 1001, 1005), ports(idC, true, 1006, 1009)...) // nine
			err = e.maps.SetPolicy(epA, next)
			if !errors.Is(err, ErrMapFull) || !strings.Contains(err.Error(), "needs 9 policy map entries, more than 8") {
				t.Fatalf("SetPolicy of nine entries into maps of eight: %v, want ErrMapFull naming both", err)
			}
			after, err := e.maps.PolicyState(epA)
			must(t, err)
			if !maps.Equal(before, after) {
				t.Fatalf("policy after a refused update\n%+v, want the old one\n%+v", after, before)
			}
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"))
			e.denied(e.fromContainer, tcp(ipA, ipD, 40001, 22, "S"), spec.DropPolicyDeny)
			e.denied(e.fromContainer, tcp(ipA, ipC, 40002, 1001, "S"), spec.DropPolicy)
			// One entry fewer fits.
			e.setPolicy(epA, next[:8]...)
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40003, 1001, "S"))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40004, 1006, "S"), spec.DropPolicyDeny)
			e.denied(e.fromContainer, tcp(ipA, ipC, 40005, 80, "S"), spec.DropPolicy)
		}},
		{"an update that does not fit in place swaps the whole map", small, func(t *testing.T, e *env) {
			// Six allows and two denies fill the map; the new policy
			// keeps the allows and has two other denies, which go in
			// before the old ones may go out: ten at the fullest moment.
			e.setPolicy(epA, append(ports(idC, false, 1, 6), ports(idD, true, 1, 2)...)...)
			before, err := e.maps.policyMapOf(epA)
			must(t, err)
			defer before.Close()
			beforeInfo, err := before.Info()
			must(t, err)
			beforeID, _ := beforeInfo.ID()
			e.setPolicy(epA, append(ports(idC, false, 1, 6), ports(idD, true, 3, 4)...)...)
			after, err := e.maps.policyMapOf(epA)
			must(t, err)
			defer after.Close()
			afterInfo, err := after.Info()
			must(t, err)
			if afterID, _ := afterInfo.ID(); afterID == beforeID {
				t.Fatal("the update was written in place into a map it does not fit")
			}
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 6, "S"))
			e.denied(e.fromContainer, tcp(ipA, ipD, 40001, 3, "S"), spec.DropPolicyDeny)
			e.denied(e.fromContainer, tcp(ipA, ipD, 40002, 1, "S"), spec.DropPolicy)
		}},
		{"one endpoint's full map leaves another's alone", small, func(t *testing.T, e *env) {
			e.setPolicy(epA, ports(idC, false, 1, 8)...)
			if err := e.maps.SetPolicy(epA, ports(idC, false, 1, 9)); !errors.Is(err, ErrMapFull) {
				t.Fatalf("a ninth entry for A: %v, want ErrMapFull", err)
			}
			must(t, e.maps.SetPolicy(epB, ports(idC, false, 1, 8)))
			state, err := e.maps.PolicyState(epB)
			must(t, err)
			if len(state) != 8 {
				t.Fatalf("B's map holds %d entries, want 8", len(state))
			}
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40000, 8, "S"))
		}},
		{"an endpoint without a policy map allows nothing", envOpts{policyEgress: true, policyIngress: true}, func(t *testing.T, e *env) {
			e.denied(e.fromContainer, tcp(ipA, ipC, 40000, 80, "S"), spec.DropPolicy)
			e.denied(e.fromNetdev, tcp(ipC, ipA, 40001, 80, "S"), spec.DropPolicy)
			e.setPolicy(epA, egress(idC, 0, 0, 0))
			e.allowed(e.fromContainer, tcp(ipA, ipC, 40002, 80, "S"))
			must(t, e.maps.DeletePolicy(epA))
			e.denied(e.fromContainer, tcp(ipA, ipC, 40003, 80, "S"), spec.DropPolicy)
		}},
	})
}
