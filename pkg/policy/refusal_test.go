package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// A policy that yields more entries than an endpoint's map holds is
// refused for the endpoints it selects, alone: the engine reports the
// refusal naming the policy, changes none of their entries (the tables
// keep their policy of before), keeps computing for the other endpoints,
// and holds no more than the map's worth for a refused one however large
// the policy. Once the policy shrinks or goes, the endpoint's entries
// come back whole, and any left from before are dropped.
func TestPolicyTooLargeForTheMapIsRefusedAlone(t *testing.T) {
	const limit = 16
	e := NewEngine(ModeDefault)
	e.LimitEntries(limit)
	web, db := appIdentity(1000, "web"), appIdentity(1001, "db")
	e.UpsertIdentity(web)
	e.UpsertIdentity(db)
	var peers []identity.NumericIdentity
	for i := range 50 {
		id := appIdentity(identity.NumericIdentity(2000+i), fmt.Sprint("peer", i))
		e.UpsertIdentity(id)
		peers = append(peers, id.ID)
	}
	webOnly := IdentitySet{Name: "web", IDs: []identity.NumericIdentity{web.ID}}
	dbOnly := IdentitySet{Name: "db", IDs: []identity.NumericIdentity{db.ID}}
	small := Origin{Kind: KindCNP, Namespace: "x", Name: "small"}
	e.SetRules(small, []Rule{{Origin: small, Subject: webOnly, Direction: spec.Ingress, DefaultDeny: true,
		Peers: []Selector{IdentitySet{Name: "peer0", IDs: peers[:1]}}, Ports: []Port{{Protocol: spec.ProtoTCP, Port: 80}}}})
	e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: web.ID})
	e.UpsertEndpoint(EndpointInfo{ID: 2, Identity: db.ID})
	_, changes := e.Flush()
	before := e.Entries(1)
	if len(before) != 3 || len(changes) != 5 { // web: peer0, the host, egress allow-all; db: allow-all both ways
		t.Fatalf("web's entries %v, %d changes", before, len(changes))
	}
	status := func(eps []EndpointStatus, id uint16) EndpointStatus {
		i := slices.IndexFunc(eps, func(s EndpointStatus) bool { return s.ID == id })
		if i < 0 {
			t.Fatalf("no status of endpoint %d in %+v", id, eps)
		}
		return eps[i]
	}

	// 50 peers x 20 ports for web, and a small change for db at once.
	large := Origin{Kind: KindCNP, Namespace: "x", Name: "large"}
	var ports []Port
	for p := range 20 {
		ports = append(ports, Port{Protocol: spec.ProtoTCP, Port: uint16(1000 + 2*p)})
	}
	e.SetRules(large, []Rule{{Origin: large, Subject: webOnly, Direction: spec.Ingress, DefaultDeny: true,
		Peers: []Selector{Wildcard{}, IdentitySet{Name: "peers", IDs: peers}}, Ports: ports}})
	forDB := Origin{Kind: KindCNP, Namespace: "x", Name: "db"}
	e.SetRules(forDB, []Rule{{Origin: forDB, Subject: dbOnly, Direction: spec.Egress, DefaultDeny: true,
		Peers: []Selector{webOnly}}})
	eps, changes := e.Flush()
	if st := status(eps, 1); st.Refused == nil || st.Refused.Origin != large || st.Refused.Max != limit {
		t.Fatalf("web's status %+v, want refused for %v", st, large)
	}
	for _, c := range changes {
		if c.EndpointID == 1 {
			t.Fatalf("an entry of the refused endpoint changed: %+v", c)
		}
	}
	if st := status(eps, 2); st.Refused != nil || !st.EnforceEgress {
		t.Fatalf("db's status %+v: its own policy is in force", st)
	}
	if n := e.eps[1].keys; n > limit || len(e.Entries(1)) > limit {
		t.Fatalf("the engine holds %d keys, %d entries for the refused endpoint, more than its map's %d", n, len(e.Entries(1)), limit)
	}

	// Another change that does not make room: still refused, still no
	// entry of web changes.
	e.UpsertIdentity(appIdentity(3000, "late"))
	e.DeleteIdentity(peers[49])
	eps, changes = e.Flush()
	if i := slices.IndexFunc(eps, func(s EndpointStatus) bool { return s.ID == 1 }); i >= 0 && eps[i].Refused == nil {
		t.Fatalf("web's status %+v, want still refused", eps[i])
	}
	if slices.ContainsFunc(changes, func(c EntryChange) bool { return c.EndpointID == 1 }) {
		t.Fatal("an entry of the still refused endpoint changed")
	}

	// The large policy shrinks to what fits: web's entries are written
	// whole again, the small policy's among them.
	e.SetRules(large, []Rule{{Origin: large, Subject: webOnly, Direction: spec.Ingress, DefaultDeny: true,
		Peers: []Selector{IdentitySet{Name: "peers", IDs: peers[:4]}}, Ports: ports[:2]}})
	eps, changes = e.Flush()
	st := status(eps, 1)
	if st.Refused != nil || !st.Resync {
		t.Fatalf("web's status %+v, want it no longer refused and resynced", st)
	}
	got := map[spec.PolicyEntry]bool{}
	for _, c := range changes {
		if c.EndpointID == 1 {
			got[c.Entry] = true
		}
	}
	want := e.Entries(1)
	if len(got) != len(want) || len(want) != 3+8 {
		t.Fatalf("resync wrote %d entries, want all %d (the small policy's 3 and 4 peers x 2 ports)", len(got), len(want))
	}
	for ent := range want {
		if !got[ent] {
			t.Fatalf("resync left out %s", ent)
		}
	}
	if _, changes := e.Flush(); len(changes) != 0 {
		t.Fatalf("%d changes with nothing changed", len(changes))
	}
}

// refusalWorld is web's egress rules under a map of limit keys, and the
// names learned for addresses.
type refusalWorld struct {
	t *testing.T
	e *Engine
}

func newRefusalWorld(t *testing.T, limit int, rules ...Rule) *refusalWorld {
	web := appIdentity(1000, "web")
	e := NewEngine(ModeDefault)
	e.LimitEntries(limit)
	e.UpsertIdentity(web)
	w := &refusalWorld{t: t, e: e}
	w.setRules(rules...)
	e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: web.ID})
	return w
}

var refusalOrigin = Origin{Kind: KindCNP, Namespace: "x", Name: "egress"}

// egress is a rule of web's egress to peer.
func egress(peer Selector, ports ...Port) Rule {
	return Rule{Origin: refusalOrigin, Subject: IdentitySet{Name: "web", IDs: []identity.NumericIdentity{1000}},
		Direction: spec.Egress, DefaultDeny: true, Peers: []Selector{peer}, Ports: ports}
}

// setRules makes rules the policy's; one origin keeps their order, the
// order the engine computes their entries in.
func (w *refusalWorld) setRules(rules ...Rule) { w.e.SetRules(refusalOrigin, rules) }

// learn makes names[i] the name learned for address 192.0.2.(i+1), in a
// map of its own (the engine keeps the map it is given).
func (w *refusalWorld) learn(names ...string) {
	m := map[netip.Addr][]string{}
	for i, n := range names {
		m[netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i)})] = []string{n}
	}
	w.e.SetFQDNNames(m)
}

// flush flushes and returns web's status, and the entries that changed.
func (w *refusalWorld) flush() (EndpointStatus, map[spec.PolicyEntry]bool) {
	w.t.Helper()
	eps, changes := w.e.Flush()
	changed := map[spec.PolicyEntry]bool{}
	for _, c := range changes {
		changed[c.Entry] = true
	}
	i := slices.IndexFunc(eps, func(s EndpointStatus) bool { return s.ID == 1 })
	if i < 0 {
		w.t.Fatalf("no status of web in %+v", eps)
	}
	return eps[i], changed
}

var (
	https = Port{Protocol: spec.ProtoTCP, Port: 443}
	// fourKeys is one entry that takes 4 keys: 81, 82-83, 84-87, 88.
	fourKeys = Port{Protocol: spec.ProtoTCP, Port: 81, EndPort: 88}
)

// A refused endpoint whose policy fits again because an identity went
// that it never got to take entries for (contributions stop at the
// overflow) is computed again: here the address whose entries did not
// fit is forgotten.
func TestRefusedEndpointFitsWhenWhatDidNotFitGoes(t *testing.T) {
	w := newRefusalWorld(t, 4, egress(NewFQDNSelector(DNSRule{MatchName: "a.io"}), https),
		egress(NewFQDNSelector(DNSRule{MatchName: "b.io"}), fourKeys))
	w.learn("a.io") // and the ingress allow-all: 2 keys
	if st, _ := w.flush(); st.Refused != nil {
		t.Fatalf("a.io's address refused: %v", st.Refused)
	}
	// b.io's address takes 4 keys more, in one entry: the one that does
	// not fit, in the rules' order.
	w.learn("a.io", "b.io")
	if st, _ := w.flush(); st.Refused == nil {
		t.Fatal("6 keys fit in a map of 4")
	}
	w.learn("a.io")
	if st, _ := w.flush(); st.Refused != nil || !st.Resync {
		t.Fatalf("the address that did not fit is forgotten, yet %+v", st)
	}
}

// Addresses forgotten keep their identities until Flush collects them;
// an endpoint computed again at Flush must not count them, even when a
// selector (the world's) selects every address.
func TestRefusedEndpointDoesNotCountForgottenAddresses(t *testing.T) {
	// The world's identities (world, world-ipv4), the ingress
	// allow-all and two addresses: 5 keys.
	w := newRefusalWorld(t, 5, egress(EntitySelector(api.EntityWorld), https))
	w.learn("a.io", "a.io")
	if st, _ := w.flush(); st.Refused != nil {
		t.Fatalf("2 addresses refused: %v", st.Refused)
	}
	w.learn("a.io", "a.io", "a.io")
	if st, _ := w.flush(); st.Refused == nil {
		t.Fatal("3 addresses fit")
	}
	w.learn("a.io", "a.io")
	if st, _ := w.flush(); st.Refused != nil || !st.Resync {
		t.Fatalf("the address that did not fit is forgotten, yet %+v", st)
	}
}

// A rule replaced adds its new entries before its old ones go: the
// policy overflows on the way, yet fits once the change is done, and is
// not refused. The tables are resynced (they hold the policy of before
// the change, which the engine dropped when it computed the endpoint
// again).
func TestPolicyThatFitsAfterAChangeIsNotRefused(t *testing.T) {
	a := NewFQDNSelector(DNSRule{MatchName: "a.io"})
	w := newRefusalWorld(t, 3, egress(a, https))
	w.learn("a.io", "a.io") // and the ingress allow-all: 3 keys
	if st, _ := w.flush(); st.Refused != nil {
		t.Fatalf("2 addresses refused: %v", st.Refused)
	}
	w.setRules(egress(a, Port{Protocol: spec.ProtoTCP, Port: 8443}))
	st, changed := w.flush()
	if st.Refused != nil || !st.Resync {
		t.Fatalf("the new rule takes as many keys as the old one, yet %+v", st)
	}
	want := w.e.Entries(1)
	if len(want) != 3 || len(changed) != len(want) {
		t.Fatalf("resync wrote %v, want all of %v", changed, want)
	}
	for ent := range want {
		if ent.Direction == spec.Egress && ent.Port != 8443 || !changed[ent] {
			t.Fatalf("entries %v, written %v", want, changed)
		}
	}
}
