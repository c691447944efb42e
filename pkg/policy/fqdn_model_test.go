package policy_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/fqdnmodel"
)

// toFQDNs as the datapath applies it agrees with the model
// (pkg/policy/fqdnmodel) on random rules (names, patterns, prefixes,
// entities, ports, denies) and learned names (addresses shared by names,
// names spelled in any case, with or without the root's dot), through
// changes of both: names learned and forgotten, rules added, replaced and
// removed. After each change, every probed address and packet is judged
// by the entries that the flushed changes add up to, read with the
// identity that the ipcache of the prefixes handed over gives the
// address (and at the first and last state by Trace too); the engine
// keeps prefixes for just what needs them; and the entries reached by
// deltas are those computed afresh. Under a small policy map, the
// endpoint is refused exactly when its policy does not fit, and a
// refused endpoint's entries stay those of before.

// fqdnDatapath is what the datapath holds for the endpoint, built from
// the engine's output as the agent passes it on: the entry changes of
// each Flush, and the ipcache of the prefixes that ChangedPrefixes hands
// over.
type fqdnDatapath struct {
	entries map[spec.PolicyEntry][]policy.Origin
	ipcache map[netip.Prefix]spec.IPCacheEntry
}

func (d *fqdnDatapath) sync(e *policy.Engine) {
	eps, changes := e.Flush()
	for _, st := range eps {
		if st.ID == fqdnmodel.EndpointID && st.Resync {
			// The changes are all the entries; the others go.
			clear(d.entries)
		}
	}
	for _, c := range changes {
		if c.EndpointID != fqdnmodel.EndpointID {
			continue
		}
		if len(c.Origins) == 0 {
			delete(d.entries, c.Entry)
		} else {
			d.entries[c.Entry] = c.Origins
		}
	}
	if prefixes, ok := e.ChangedPrefixes(); ok {
		d.ipcache = desiredIPCache(prefixes)
	}
}

func desiredIPCache(prefixes []policy.Prefix) map[netip.Prefix]spec.IPCacheEntry {
	rows := make([]ipcache.PolicyPrefixRow, len(prefixes))
	for i, p := range prefixes {
		rows[i] = ipcache.PolicyPrefixRow(p)
	}
	return ipcache.DesiredIPCache(ipcache.Cluster{Prefixes: rows})
}

// identityOf is the identity the ipcache gives an address: its longest
// prefix's, the world's when none holds it.
func (d *fqdnDatapath) identityOf(a netip.Addr) identity.NumericIdentity {
	for bits := a.BitLen(); bits >= 0; bits-- {
		if ent, ok := d.ipcache[netip.PrefixFrom(a, bits).Masked()]; ok {
			return ent.Identity
		}
	}
	return identity.World
}

// fqdnHeld is what the engine was last given of a world, so that a
// change gives it only what changed.
type fqdnHeld struct {
	rules   []fqdnmodel.Rule
	learned map[string][]netip.Addr
}

// apply gives e what changed in w since the last apply, rules and names
// in a random order. Names unchanged are sometimes given again (the
// agent gives all of them at every change).
func (h *fqdnHeld) apply(r *rand.Rand, e *policy.Engine, w *fqdnmodel.World) {
	ops := []func(){
		func() {
			for i := range max(len(h.rules), len(w.Rules)) {
				if i < len(h.rules) && i < len(w.Rules) && reflect.DeepEqual(h.rules[i], w.Rules[i]) {
					continue
				}
				var rules []policy.Rule
				if i < len(w.Rules) {
					rules = []policy.Rule{w.EngineRule(i)}
				}
				e.SetRules(fqdnmodel.Origin(i), rules)
			}
			h.rules = w.Rules
		},
		func() {
			if !reflect.DeepEqual(h.learned, w.Learned) || r.IntN(4) == 0 {
				e.SetFQDNNames(w.AddressNames(r))
			}
			h.learned = w.Learned
		},
	}
	r.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	for _, op := range ops {
		op()
	}
}

func TestEngineAgreesWithFQDNModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for scenario := range 1000 {
		w := fqdnmodel.Random(r)
		e := policy.NewEngine(w.EngineMode())
		// Some endpoints' maps are small: names learned can make their
		// policy too large, and names forgotten make it fit again.
		limit := 0
		if r.IntN(3) == 0 {
			limit = 3 + r.IntN(16)
			e.LimitEntries(limit)
		}
		dp := &fqdnDatapath{entries: map[spec.PolicyEntry][]policy.Origin{}}
		var held fqdnHeld
		e.UpsertIdentity(fqdnmodel.EndpointIdentity())
		// The endpoint comes before the rules and names, or after.
		early := r.IntN(2) == 0
		if early {
			e.UpsertEndpoint(policy.EndpointInfo{ID: fqdnmodel.EndpointID, Identity: fqdnmodel.EndpointIdentity().ID})
		}
		held.apply(r, e, w)
		if !early {
			e.UpsertEndpoint(policy.EndpointInfo{ID: fqdnmodel.EndpointID, Identity: fqdnmodel.EndpointIdentity().ID})
		}
		dp.sync(e)
		accepted := map[spec.PolicyEntry][]policy.Origin{} // the tables' policy of before a refusal
		const steps = 8
		for step := -1; step < steps; step++ {
			if step >= 0 {
				changes := 1
				if r.IntN(3) == 0 {
					changes = 2 // before one flush
				}
				for range changes {
					w.Change(r)
				}
				held.apply(r, e, w)
				dp.sync(e)
			}
			what := fmt.Sprintf("scenario %d (limit %d), step %d", scenario, limit, step)
			fresh := w.Engine(r)
			fresh.Flush()
			keys := 0
			for ent := range fresh.Entries(fqdnmodel.EndpointID) {
				keys += ent.Keys()
			}
			st, _ := e.Endpoint(fqdnmodel.EndpointID)
			if fits := limit == 0 || keys <= limit; fits != (st.Refused == nil) {
				t.Fatalf("%s: a policy of %d keys, refused: %v\nworld: %s", what, keys, st.Refused, w.Describe())
			}
			if st.Refused != nil {
				if !maps.EqualFunc(dp.entries, accepted, slices.Equal) {
					t.Fatalf("%s: the refused endpoint's entries changed: %v, were %v", what, dp.entries, accepted)
				}
				continue
			}
			accepted = maps.Clone(dp.entries)
			// Trace computes everything anew: asked at the ends only.
			checkFQDNModel(t, what, w, e, dp, step == -1 || step == steps-1)
			if got, want := canonicalEntries(e), canonicalEntries(fresh); !maps.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("%s: by delta %v\nafresh %v\nworld: %s", what, got, want, w.Describe())
			}
		}
	}
}

// checkFQDNModel judges every probed address and packet by dp (and,
// with trace, by Trace) against the model; and checks that dp is what
// the engine holds and that its ipcache holds just the prefixes
// something needs.
func checkFQDNModel(t *testing.T, what string, w *fqdnmodel.World, e *policy.Engine, dp *fqdnDatapath, trace bool) {
	t.Helper()
	if got := e.Entries(fqdnmodel.EndpointID); !maps.EqualFunc(got, dp.entries, slices.Equal) {
		t.Fatalf("%s: the flushed changes add up to %v\nthe engine holds %v", what, dp.entries, got)
	}
	if got, want := canonicalPrefixes(e.Prefixes()), wantPrefixes(w); !slices.Equal(got, want) {
		t.Fatalf("%s: prefixes %v, want those the rules name and the learned addresses' %v\nworld: %s", what, got, want, w.Describe())
	}
	if !maps.Equal(dp.ipcache, desiredIPCache(e.Prefixes())) {
		t.Fatalf("%s: the ipcache of the prefixes handed over %v\nis not that of Prefixes %v", what, dp.ipcache, e.Prefixes())
	}
	subject := fqdnmodel.EndpointIdentity()
	for _, a := range fqdnmodel.Addresses {
		id := dp.identityOf(a)
		remote, ok := e.Identity(id)
		if !ok {
			t.Fatalf("%s: the ipcache gives %s identity %d, which the engine does not know", what, a, id)
		}
		for _, pk := range fqdnmodel.Packets {
			want := w.Allows(a, pk.Proto, pk.Port)
			if got := entriesAllow(dp.entries, spec.Egress, []*policy.Identity{remote}, pk.Proto, pk.Port); got != want {
				t.Fatalf("%s: to %s (names %q; identity %d, prefix %s, names %q) on %d/%d: model %v, entries %v\nworld: %s\nentries: %v",
					what, a, w.NamesOf(a), id, remote.Prefix, remote.Names, pk.Proto, pk.Port, want, got, w.Describe(), dp.entries)
			}
			if !trace {
				continue
			}
			if v := e.Trace(subject, nil, spec.Egress, remote, pk.Proto, pk.Port); v.Allowed != want {
				t.Fatalf("%s: to %s (names %q; identity %d, names %q) on %d/%d: model %v, trace %+v\nworld: %s",
					what, a, w.NamesOf(a), id, remote.Names, pk.Proto, pk.Port, want, v, w.Describe())
			}
		}
	}
}

// wantPrefixes are the prefixes that need a CIDR identity: those of the
// prefix peers (excepts included, and for an ipBlock in-cluster too) of
// the rules that apply to the endpoint, and the own prefix of each
// address with learned names.
func wantPrefixes(w *fqdnmodel.World) []string {
	set := map[string]bool{}
	if w.Mode != fqdnmodel.ModeNever {
		for _, r := range w.Rules {
			for _, p := range r.Peers {
				if !r.Selects || p.Kind != fqdnmodel.PeerCIDR {
					continue
				}
				for _, x := range append([]netip.Prefix{p.Prefix}, p.Except...) {
					set[x.String()] = true
					if p.InCluster {
						set[x.String()+" in-cluster"] = true
					}
				}
			}
		}
	}
	for _, addrs := range w.Learned {
		for _, a := range addrs {
			set[netip.PrefixFrom(a, a.BitLen()).String()] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func canonicalPrefixes(ps []policy.Prefix) []string {
	var out []string
	for _, p := range ps {
		s := p.Prefix.String()
		if p.InCluster {
			s += " in-cluster"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
