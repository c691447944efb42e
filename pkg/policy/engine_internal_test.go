package policy

import (
	"fmt"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
)

// countingSelector selects the identity with its app label and counts
// how often it is asked.
type countingSelector struct {
	app   string
	calls *int
}

func (s countingSelector) Key() string { return "counting:" + s.app }

func (s countingSelector) Selects(id *Identity) bool {
	*s.calls++
	return id.Labels.Has(labels.New(labels.SourceK8s, "app", s.app))
}

// countingSubject counts how often a rule's subject is asked.
type countingSubject struct {
	Selector
	calls *int
}

func (s countingSubject) Selects(id *Identity) bool {
	*s.calls++
	return s.Selector.Selects(id)
}

func appIdentity(num identity.NumericIdentity, app string) *Identity {
	ls := labels.Labels{}
	ls.Add(labels.New(labels.SourceK8s, "app", app))
	return &Identity{ID: num, Labels: ls}
}

// A rule added beside many others that select the same endpoint asks
// only its own selectors about the identities and the endpoint: the
// others' selectors, subjects and entries stay as they are, and only the
// new rule's entry changes.
func TestSetRulesBesideManyAsksOnlyTheNewSelector(t *testing.T) {
	const rules = 200
	e := NewEngine(ModeDefault)
	server := appIdentity(1000, "server")
	e.UpsertIdentity(server)
	for i := range rules + 1 {
		e.UpsertIdentity(appIdentity(identity.NumericIdentity(2000+i), fmt.Sprint("peer", i)))
	}
	calls, subjectCalls := 0, 0
	subject := countingSubject{IdentitySet{Name: "server", IDs: []identity.NumericIdentity{server.ID}}, &subjectCalls}
	rule := func(i int) []Rule {
		return []Rule{{Origin: Origin{Kind: KindCNP, Namespace: "x", Name: fmt.Sprint("p", i)}, Subject: subject,
			Direction: spec.Ingress, DefaultDeny: true,
			Peers: []Selector{countingSelector{app: fmt.Sprint("peer", i), calls: &calls}},
			Ports: []Port{{Protocol: spec.ProtoTCP, Port: 80}}}}
	}
	for i := range rules {
		e.SetRules(Origin{Kind: KindCNP, Namespace: "x", Name: fmt.Sprint("p", i)}, rule(i))
	}
	e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: server.ID})
	if _, changes := e.Flush(); len(changes) != rules+2 { // an entry per peer, the host's and egress allow-all
		t.Fatalf("%d entry changes after %d rules, want %d", len(changes), rules, rules+2)
	}

	calls, subjectCalls = 0, 0
	e.SetRules(Origin{Kind: KindCNP, Namespace: "x", Name: fmt.Sprint("p", rules)}, rule(rules))
	identities := len(e.cache.ids)
	if calls > identities {
		t.Errorf("adding a rule asked selectors %d times; only the new one over %d identities should be asked", calls, identities)
	}
	if subjectCalls > 3 { // does the new rule select the endpoint: a few times, not the other rules
		t.Errorf("adding a rule asked rules' subjects %d times; only the new rule's should be asked", subjectCalls)
	}
	_, changes := e.Flush()
	if len(changes) != 1 || changes[0].Entry.Identity != 2000+rules {
		t.Errorf("adding a rule changed %d entries, want only identity %d's", len(changes), 2000+rules)
	}

	calls, subjectCalls = 0, 0
	e.SetRules(Origin{Kind: KindCNP, Namespace: "x", Name: "p0"}, nil)
	if calls != 0 || subjectCalls > 1 {
		t.Errorf("removing a rule asked peer selectors %d times and subjects %d times, want none and the removed rule's", calls, subjectCalls)
	}
	if _, changes := e.Flush(); len(changes) != 1 || changes[0].Entry.Identity != 2000 || len(changes[0].Origins) != 0 {
		t.Errorf("removing a rule changed %d entries, want only identity 2000's gone", len(changes))
	}
}
