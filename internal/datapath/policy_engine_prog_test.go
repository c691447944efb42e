package datapath

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/policymodel"
)

// TestPrivilegedProgPolicyEngineAgreesWithModel closes the loop from rules
// to packets: random rules and identities (policymodel.Random) go into
// the policy engine, its entries into the policy map group by group,
// and new connections of every kind between endpoint A and a peer run
// through A's programs (from-container for egress, from-netdev for
// ingress, to-container for the node's own). Each verdict must be the model's. The peer is C's address,
// whose ipcache entry takes each identity in turn, and for a pod inside
// an ipBlock the block's CIDR identity beside it.
func TestPrivilegedProgPolicyEngineAgreesWithModel(t *testing.T) {
	e := newEnv(t, envOpts{mode: spec.Native, policyIngress: true, policyEgress: true})
	r := rand.New(rand.NewPCG(5, 6))
	port := uint16(20000)
	for scenario := range 150 {
		w := policymodel.Random(r)
		pods := w.Pods()
		subject := pods[r.IntN(len(pods))]
		own := policymodel.Subset(r, policymodel.NamedPortChoices())
		eng := w.Engine(epA, subject, own)
		groups := map[spec.PolicyGroup][]spec.PolicyEntry{}
		for ent := range eng.Entries(epA) {
			groups[ent.Group(epA)] = append(groups[ent.Group(epA)], ent)
		}
		_, err := e.maps.SyncPolicy(groups)
		must(t, err)
		clearConntrack(t, e.maps)
		for _, remotes := range w.Remotes() {
			peer := spec.IPCacheEntry{Identity: remotes[0].ID, TunnelEndpoint: remoteIP}
			if len(remotes) > 1 {
				peer.CIDRIdentity = remotes[1].ID
			}
			must(t, e.maps.UpsertIPCache(netip.PrefixFrom(ipC, 32), peer))
			for _, dir := range []spec.Direction{spec.Ingress, spec.Egress} {
				for _, pk := range policymodel.Packets {
					port++
					want := w.Allows(subject, own, dir, remotes, pk.Proto, pk.Port)
					p := modelPacket(dir, pk, port)
					prog := e.fromContainer
					switch {
					case dir == spec.Ingress && remotes[0].ID == identity.Host:
						// The node's own packets come through its stack;
						// from the network they would be the world's.
						prog = e.toContainer
					case dir == spec.Ingress:
						prog = e.fromNetdev
					}
					verdict, _ := e.run(prog, p.frame(t))
					e.drain()
					if got := verdict != actShot; got != want {
						t.Fatalf("scenario %d: %s %s with identities %v: datapath allowed=%v (verdict %d), model %v\nrules: %s\nentries: %v",
							scenario, dir, describePacket(p), peerIDs(remotes), got, verdict, want, policymodel.Describe(w.Rules), eng.Entries(epA))
					}
				}
			}
		}
	}
}

// modelPacket is the first packet of a new connection between A and the
// peer (C's address): from A for egress, to A for ingress. Each gets a
// port of its own, so that none is taken for an earlier connection's.
func modelPacket(dir spec.Direction, pk policymodel.Packet, own uint16) pkt {
	src, dst := ipA, ipC
	if dir == spec.Ingress {
		src, dst = ipC, ipA
	}
	switch pk.Proto {
	case spec.ProtoTCP:
		return tcp(src, dst, own, pk.Port, "S")
	case spec.ProtoUDP:
		return udp(src, dst, own, pk.Port)
	case spec.ProtoSCTP:
		return sctp(src, dst, own, pk.Port)
	case spec.ProtoICMP:
		if pk.Port != 8 {
			panic(fmt.Sprintf("the model's ICMP packets are echo requests, not type %d", pk.Port))
		}
		return echo(src, dst, own, false)
	}
	panic(fmt.Sprintf("protocol %d", pk.Proto))
}

func peerIDs(remotes []*policy.Identity) []identity.NumericIdentity {
	var out []identity.NumericIdentity
	for _, r := range remotes {
		out = append(out, r.ID)
	}
	return out
}
