package datapath

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// lpmAllows judges a first packet against a policy map's keys as the
// datapath does: per identity (the remote's and the wildcard) the longest
// prefix that matches, a deny of either winning.
func lpmAllows(state map[PolicyKey]PolicyValue, ep uint16, dir spec.Direction, remote identity.NumericIdentity, proto uint8, port uint16) bool {
	matched := false
	for _, id := range []identity.NumericIdentity{remote, identity.Unknown} {
		probe := PolicyKey{Prefixlen: policyPrefixFull, Identity: uint32(id), EpId: ep, Direction: uint8(dir),
			Protocol: proto, Dport: htons(port)}
		var best *PolicyKey
		for k := range state {
			if covers(k, probe) && (best == nil || k.Prefixlen > best.Prefixlen) {
				best = &k
			}
		}
		if best == nil {
			continue
		}
		if state[*best].Flags&policyFlagDeny != 0 {
			return false
		}
		matched = true
	}
	return matched
}

// randomPolicy draws entries of one endpoint's egress towards two peers
// and the wildcard: ports and ranges of a few protocols, some denies.
func randomPolicy(r *rand.Rand) []spec.PolicyEntry {
	var out []spec.PolicyEntry
	for range r.IntN(8) {
		e := spec.PolicyEntry{Direction: spec.Egress,
			Identity: []identity.NumericIdentity{idC, idD, identity.Unknown}[r.IntN(3)], Deny: r.IntN(3) == 0}
		switch r.IntN(4) {
		case 0: // every protocol and port
		case 1:
			e.Protocol = tcpProto
		default:
			e.Protocol = []uint8{tcpProto, udpProto}[r.IntN(2)]
			e.Port = uint16(1 + r.IntN(8))
			if r.IntN(2) == 0 {
				e.EndPort = e.Port + uint16(r.IntN(6))
			}
		}
		out = append(out, e)
	}
	return out
}

// The order an update is written in never leaves the endpoint more open
// than both its old and its new policy: after every single write of the
// plan, each packet the map lets through is one the old or the new
// policy allows. Without the order (writing the new policy's keys as
// they come, then removing the old ones), a new deny written after the
// allows it overrides, or an old deny removed first, fails this.
func TestPolicyPlanNeverOpensBeyondOldAndNew(t *testing.T) {
	const ep = epA
	r := rand.New(rand.NewPCG(25, 4))
	for round := range 3000 {
		oldEntries, newEntries := randomPolicy(r), randomPolicy(r)
		oldState, err := PolicyMapState(ep, oldEntries)
		must(t, err)
		cur := &endpointPolicy{groups: map[spec.PolicyGroup]map[PolicyKey]PolicyValue{}}
		for k, v := range oldState {
			if cur.groups[groupOf(k)] == nil {
				cur.groups[groupOf(k)] = map[PolicyKey]PolicyValue{}
			}
			cur.groups[groupOf(k)][k] = v
			cur.n++
		}
		desired := map[spec.PolicyGroup]map[PolicyKey]PolicyValue{}
		newState, err := PolicyMapState(ep, newEntries)
		must(t, err)
		for _, id := range []identity.NumericIdentity{idC, idD, identity.Unknown} {
			desired[spec.PolicyGroup{EndpointID: ep, Direction: spec.Egress, Identity: id}] = map[PolicyKey]PolicyValue{}
		}
		for k, v := range newState {
			desired[groupOf(k)][k] = v
		}
		plan := planPolicy(cur, desired)
		state := maps.Clone(oldState)
		check := func(step int) {
			for _, remote := range []identity.NumericIdentity{idC, idD, 4242} {
				for _, proto := range []uint8{tcpProto, udpProto, spec.ProtoSCTP} {
					for port := uint16(1); port <= 14; port++ {
						if lpmAllows(state, ep, spec.Egress, remote, proto, port) &&
							!lpmAllows(oldState, ep, spec.Egress, remote, proto, port) &&
							!lpmAllows(newState, ep, spec.Egress, remote, proto, port) {
							t.Fatalf("round %d, after write %d of %d: %d/%d to %d allowed, by neither policy\nold %v\nnew %v\nmap %v",
								round, step, len(plan.ops), proto, port, remote, oldEntries, newEntries, state)
						}
					}
				}
			}
		}
		peak := len(state)
		for i, op := range plan.ops {
			if op.del {
				delete(state, op.key)
			} else {
				state[op.key] = op.value
			}
			peak = max(peak, len(state))
			check(i + 1)
		}
		if !maps.Equal(state, newState) {
			t.Fatalf("round %d: the plan leaves %v, want %v", round, state, newState)
		}
		if plan.peak != peak || plan.final != len(newState) {
			t.Fatalf("round %d: plan says peak %d, final %d; writing it took %d, left %d", round, plan.peak, plan.final, peak, len(newState))
		}
	}
}
