package policy_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/policymodel"
)

// The engine's entries, read the way the datapath reads them, and its
// trace agree with the model (pkg/policy/policymodel) on random rules,
// identities and packets; and entries reached by deltas equal entries
// computed afresh.

// entriesAllow is the datapath's reading of entries: a deny that matches
// any of the peer's identities wins, else an allow that matches one lets
// the packet through.
func entriesAllow(ents map[spec.PolicyEntry][]policy.Origin, dir spec.Direction, remotes []*policy.Identity, proto uint8, port uint16) bool {
	allowed := false
	for ent := range ents {
		if ent.Direction != dir || !entryMatches(ent, proto, port) {
			continue
		}
		if ent.Identity != identity.Unknown && !slices.ContainsFunc(remotes, func(r *policy.Identity) bool { return r.ID == ent.Identity }) {
			continue
		}
		if ent.Deny {
			return false
		}
		allowed = true
	}
	return allowed
}

func entryMatches(ent spec.PolicyEntry, proto uint8, port uint16) bool {
	if ent.Protocol != 0 && ent.Protocol != proto {
		return false
	}
	return ent.Port == 0 || (port >= ent.Port && port <= max(ent.Port, ent.EndPort))
}

func TestEngineAgreesWithModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		w := policymodel.Random(r)
		pods := w.Pods()
		subject := pods[r.IntN(len(pods))]
		own := policymodel.Subset(r, policymodel.NamedPortChoices())
		e := w.Engine(1, subject, own)
		ents := e.Entries(1)
		for _, remotes := range w.Remotes() {
			for _, dir := range []spec.Direction{spec.Ingress, spec.Egress} {
				for _, pk := range policymodel.Packets {
					want := w.Allows(subject, own, dir, remotes, pk.Proto, pk.Port)
					got := entriesAllow(ents, dir, remotes, pk.Proto, pk.Port)
					if got != want {
						t.Fatalf("scenario %d: %s from/to %v on %d/%d: model %v, entries %v\nrules: %s\nentries: %v",
							i, dir, ids(remotes), pk.Proto, pk.Port, want, got, policymodel.Describe(w.Rules), ents)
					}
					if len(remotes) > 1 {
						continue // the trace judges one identity
					}
					if trace := e.Trace(subject, own, dir, remotes[0], pk.Proto, pk.Port); trace.Allowed != want {
						t.Fatalf("scenario %d: %s from/to %v on %d/%d: model %v, trace %+v\nrules: %s",
							i, dir, ids(remotes), pk.Proto, pk.Port, want, trace, policymodel.Describe(w.Rules))
					}
				}
			}
		}
	}
}

func ids(remotes []*policy.Identity) []identity.NumericIdentity {
	var out []identity.NumericIdentity
	for _, r := range remotes {
		out = append(out, r.ID)
	}
	return out
}

func TestEngineDeltasEqualFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 1000 {
		w := policymodel.Random(r)
		pods := w.Pods()
		subject := pods[r.IntN(len(pods))]
		own := policymodel.Subset(r, policymodel.NamedPortChoices())

		e := policy.NewEngine(w.Mode)
		e.UpsertEndpoint(policy.EndpointInfo{ID: 1, Identity: subject.ID, NamedPorts: own})
		for i, rule := range policymodel.Random(r).Rules { // rules later replaced
			e.SetRules(policy.Origin{Kind: policy.KindCNP, Name: fmt.Sprint(i)}, []policy.Rule{rule})
		}
		all := slices.Clone(w.IDs)
		r.Shuffle(len(all), func(a, b int) { all[a], all[b] = all[b], all[a] })
		for _, id := range all {
			e.UpsertIdentity(id)
			e.SetNamedPorts(id.ID, policymodel.Subset(r, policymodel.NamedPortChoices()))
			if r.IntN(4) == 0 {
				e.DeleteIdentity(id.ID)
			}
		}
		for i := range 6 {
			var rules []policy.Rule
			if i < len(w.Rules) {
				rules = []policy.Rule{w.Rules[i]}
			}
			e.SetRules(policy.Origin{Kind: policy.KindCNP, Name: fmt.Sprint(i)}, rules)
		}
		for _, id := range all {
			e.UpsertIdentity(id)
			e.SetNamedPorts(id.ID, w.NamedPorts[id.ID])
		}
		fresh := w.Engine(1, subject, own)
		e.Flush()
		fresh.Flush()
		if got, want := canonicalEntries(e), canonicalEntries(fresh); !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("scenario %d: by delta %v\nafresh %v\nrules: %s", i, got, want, policymodel.Describe(w.Rules))
		}
	}
}

// canonicalEntries are endpoint 1's entries with the CIDR identities
// that the engine numbered itself named by their prefixes: two engines
// number them in the order they met them.
func canonicalEntries(e *policy.Engine) map[string][]policy.Origin {
	out := map[string][]policy.Origin{}
	for ent, origins := range e.Entries(1) {
		s := ent.String()
		if id, ok := e.Identity(ent.Identity); ok && id.Prefix.IsValid() && id.ID < policymodel.FirstCIDRIdentity {
			ent.Identity = 0
			s = fmt.Sprintf("%s (cidr %s in-cluster=%v)", ent, id.Prefix, id.InCluster)
		}
		out[s] = origins
	}
	return out
}
