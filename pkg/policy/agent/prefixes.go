package agent

import (
	"fmt"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/policy"
)

// publishPrefixes writes the engine's prefixes into their table when they
// changed, and marks the table initialized with the first write
// (markInitialized): the ipcache waits for that, so that its first
// entries already carry the CIDR identities the policy maps name. The
// ipcache has a change before the entries that name its identities are
// reconciled or soon after; either way an address is judged by an
// identity the policy map knows or by the world's.
func (a *Agent) publishPrefixes(markInitialized bool) {
	prefixes, changed := a.engine.ChangedPrefixes()
	if !changed && !markInitialized {
		return
	}
	txn := a.db.WriteTxn(a.prefixes)
	defer txn.Abort() // a no-op after Commit
	if changed {
		if err := writePrefixes(txn, a.prefixes, prefixes); err != nil {
			a.log.Error("write policy prefixes", "error", err)
			return
		}
	}
	if markInitialized {
		a.prefixesInit(txn)
	}
	txn.Commit()
}

// writePrefixes makes tbl hold exactly prefixes, rewriting only the rows
// that changed, so that the ipcache recomputes only the addresses under
// those.
func writePrefixes(txn statedb.WriteTxn, tbl statedb.RWTable[*ipcache.PolicyPrefixRow], prefixes []policy.Prefix) error {
	want := make(map[ipcache.PrefixKey]*ipcache.PolicyPrefixRow, len(prefixes))
	for _, p := range prefixes {
		row := ipcache.PolicyPrefixRow(p)
		want[row.Key()] = &row
	}
	var stale []*ipcache.PolicyPrefixRow
	for row := range tbl.All(txn) {
		if _, ok := want[row.Key()]; !ok {
			stale = append(stale, row)
		}
	}
	for _, row := range stale {
		if _, _, err := tbl.Delete(txn, row); err != nil {
			return fmt.Errorf("delete policy prefix %s: %w", row.Prefix, err)
		}
	}
	for k, row := range want {
		if cur, _, ok := tbl.Get(txn, ipcache.PrefixKeyIndex.Query(k)); ok && *cur == *row {
			continue
		}
		if _, _, err := tbl.Insert(txn, row); err != nil {
			return fmt.Errorf("insert policy prefix %s: %w", row.Prefix, err)
		}
	}
	return nil
}
