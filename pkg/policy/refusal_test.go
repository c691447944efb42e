package policy

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
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
