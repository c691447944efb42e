package agent

import (
	"cmp"
	"maps"
	"slices"
	"strconv"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/cilium-go/cilium/pkg/policy"
)

// PolicyChangesName is the policy changes' table in statedb.
const PolicyChangesName = "policy-changes"

// PolicyChangeRow is a row of the policy changes: the last change of one
// policy's rules, for those who tell of policy updates (Hubble's agent
// events). A policy's removal is the deletion of its row, whose last
// state (Rules 0, the revision of the removal) the table's change
// iterators see.
type PolicyChangeRow struct {
	Origin policy.Origin
	// Rules is how many rules the policy has; 0 when it has none, or
	// when it was removed.
	Rules int
	// Revision counts the changes of the agent's policies, as
	// Agent.PolicyRevision does (less one).
	Revision uint64
}

// TableHeader implements statedb.TableWritable.
func (*PolicyChangeRow) TableHeader() []string { return []string{"Policy", "Rules", "Revision"} }

// TableRow implements statedb.TableWritable.
func (c *PolicyChangeRow) TableRow() []string {
	return []string{c.Origin.String(), strconv.Itoa(c.Rules), strconv.FormatUint(c.Revision, 10)}
}

// PolicyChangeIndex is the policy changes' primary index: one row per
// policy, by its origin ("kind/namespace/name").
var PolicyChangeIndex = statedb.Index[*PolicyChangeRow, policy.Origin]{
	Name: "origin",
	FromObject: func(c *PolicyChangeRow) index.KeySet {
		return index.NewKeySet(index.String(c.Origin.String()))
	},
	FromKey:    func(o policy.Origin) index.Key { return index.String(o.String()) },
	FromString: index.FromString,
	Unique:     true,
}

// NewPolicyChangesTable creates the policy changes' table.
func NewPolicyChangesTable(db *statedb.DB) (statedb.RWTable[*PolicyChangeRow], error) {
	return statedb.NewTable(db, PolicyChangesName, PolicyChangeIndex)
}

// writePolicyChanges puts the policies' changes since the last write
// into their table, in the order they happened, which the table's
// change iterators see: a removed policy's row is written with its
// removal, then deleted, so that the deletion carries it.
func writePolicyChanges(txn statedb.WriteTxn, tbl statedb.RWTable[*PolicyChangeRow], changes map[policy.Origin]*PolicyChangeRow) error {
	ordered := slices.SortedFunc(maps.Values(changes), func(x, y *PolicyChangeRow) int { return cmp.Compare(x.Revision, y.Revision) })
	for _, c := range ordered {
		if _, _, err := tbl.Insert(txn, c); err != nil {
			return err
		}
		if c.Rules > 0 {
			continue
		}
		if _, _, err := tbl.Delete(txn, c); err != nil {
			return err
		}
	}
	return nil
}
