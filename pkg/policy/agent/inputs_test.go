package agent

import (
	"testing"

	"github.com/cilium/hive/hivetest"
	"github.com/cilium/statedb"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/policy"
)

// inputsFixture is an agent over tables in a database of its own, whose
// changes the test hands the engine itself (apply), one look at a time.
type inputsFixture struct {
	t      *testing.T
	db     *statedb.DB
	k8s    *tables.RW
	agent  *Agent
	in     *inputs
	policy policy.Origin
}

func newInputsFixture(t *testing.T) *inputsFixture {
	db := statedb.New()
	k8s, err := tables.NewRW(db)
	if err != nil {
		t.Fatal(err)
	}
	eps, err := endpoint.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := NewEntriesTable(db)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := NewPolicyChangesTable(db)
	if err != nil {
		t.Fatal(err)
	}
	prefixes, err := ipcache.NewPrefixesTable(db)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAgent(agentParams{Config: DefaultConfig, Log: hivetest.Logger(t), DB: db, Table: tbl, Entries: entries,
		Changes: changes, Prefixes: prefixes, Cookies: policy.NewCookies(), Endpoints: eps,
		Pods: k8s.Pods, Services: k8s.Services, EndpointSlices: k8s.EndpointSlices, NetworkPolicies: k8s.NetworkPolicies,
		CNPs: k8s.CNPs, CCNPs: k8s.CCNPs, CiliumIdentities: k8s.CiliumIdentities, CiliumEndpoints: k8s.CiliumEndpoints,
		CIDRGroups: k8s.CIDRGroups, MapConfig: DefaultMapConfig})
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := a.follow()
	if err != nil {
		t.Fatal(err)
	}
	return &inputsFixture{t: t, db: db, k8s: k8s, agent: a, in: in,
		policy: policy.Origin{Kind: policy.KindNetworkPolicy, Namespace: "shop", Name: "web"}}
}

// networkPolicy isolates the pods app=web of shop, allowing TCP port in;
// uid tells one object of that name from another.
func (f *inputsFixture) networkPolicy(uid types.UID, generation int64, port int32) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: uid, Generation: generation}}
	np.Spec.PodSelector.MatchLabels = map[string]string{"app": "web"}
	p := intstr.FromInt32(port)
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &p}}}}
	return np
}

func (f *inputsFixture) put(np *networkingv1.NetworkPolicy) {
	txn := f.db.WriteTxn(f.k8s.NetworkPolicies)
	if _, _, err := f.k8s.NetworkPolicies.Insert(txn, np); err != nil {
		f.t.Fatal(err)
	}
	txn.Commit()
}

func (f *inputsFixture) remove() {
	txn := f.db.WriteTxn(f.k8s.NetworkPolicies)
	if _, _, err := f.k8s.NetworkPolicies.Delete(txn, f.networkPolicy("", 0, 0)); err != nil {
		f.t.Fatal(err)
	}
	txn.Commit()
}

// look hands the engine every change so far and writes what it changed.
func (f *inputsFixture) look() {
	f.agent.apply(f.in, f.db.ReadTxn())
	f.agent.write(false)
}

// rules are the policy's rules in the engine.
func (f *inputsFixture) rules() []policy.Rule { return f.agent.engine.RulesOf(f.policy) }

// A policy's change that waits in its table is applied as the table has
// it when the engine looks: a policy updated and deleted since the last
// look leaves no rules, its removal counted and written; one that came
// and went between two looks was never heard of.
func TestPolicyDeletedWhileItsChangeIsPendingLeavesNoRules(t *testing.T) {
	f := newInputsFixture(t)
	f.put(f.networkPolicy("u1", 1, 80))
	f.look()
	if len(f.rules()) == 0 {
		t.Fatal("no rules after the policy came")
	}
	row, _, ok := f.agent.changes.Get(f.db.ReadTxn(), PolicyChangeIndex.Query(f.policy))
	if !ok || row.Rules == 0 || row.Revision != 1 {
		t.Fatalf("policy change %+v (found %v), want the policy's rules at revision 1", row, ok)
	}

	wtxn := f.db.WriteTxn(f.agent.changes)
	changes, err := f.agent.changes.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	f.put(f.networkPolicy("u1", 2, 8080))
	f.remove()
	f.look()
	if rs := f.rules(); len(rs) != 0 {
		t.Fatalf("rules %v after the policy went, want none", rs)
	}
	if _, _, ok := f.agent.changes.Get(f.db.ReadTxn(), PolicyChangeIndex.Query(f.policy)); ok {
		t.Error("the removed policy still has its row")
	}
	var seen []statedb.Change[*PolicyChangeRow]
	evs, _ := changes.Next(f.db.ReadTxn())
	for ev := range evs {
		seen = append(seen, ev)
	}
	if len(seen) != 1 || !seen[0].Deleted || seen[0].Object.Rules != 0 || seen[0].Object.Revision != 2 {
		t.Errorf("policy changes %+v, want the row's deletion with no rules at revision 2", seen)
	}

	// Came and went between two looks: nothing to take back.
	f.put(f.networkPolicy("u1", 3, 80))
	f.remove()
	f.look()
	if f.agent.policyRevision != 2 || len(f.rules()) != 0 {
		t.Errorf("revision %d and rules %v after a policy no look saw, want revision 2 and no rules", f.agent.policyRevision, f.rules())
	}
}

// A change that leaves a policy's generation (its status, say) is not
// translated again: the engine counts no change; another object of the
// same name and generation is.
func TestPolicyUnchangedGenerationIsNotTranslatedAgain(t *testing.T) {
	f := newInputsFixture(t)
	f.put(f.networkPolicy("u1", 1, 80))
	f.look()
	f.put(f.networkPolicy("u1", 1, 8080)) // as if only its status changed
	f.look()
	if f.agent.policyRevision != 1 {
		t.Errorf("revision %d, want 1: the same generation counts as no change", f.agent.policyRevision)
	}
	f.put(f.networkPolicy("u1", 2, 8080))
	f.look()
	if f.agent.policyRevision != 2 {
		t.Errorf("revision %d, want 2 after the generation changed", f.agent.policyRevision)
	}
	// Deleted and made again between two looks, at the generation of the
	// one before: another object, translated.
	f.remove()
	f.put(f.networkPolicy("u2", 2, 443))
	f.look()
	if rs := f.rules(); f.agent.policyRevision != 3 || len(rs) != 1 || len(rs[0].Ports) != 1 || rs[0].Ports[0].Port != 443 {
		t.Errorf("revision %d, rules %+v, want revision 3 and the new object's port 443", f.agent.policyRevision, rs)
	}
}
