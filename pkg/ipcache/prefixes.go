package ipcache

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// PrefixesTableName is the name in statedb of the table of the prefixes
// that policy rules name.
const PrefixesTableName = "policy-prefixes"

// PrefixKey identifies a row of the prefixes table: a prefix may be named
// both for the world's addresses in it and, with its own CIDR identity,
// for the cluster's.
type PrefixKey struct {
	Prefix    netip.Prefix
	InCluster bool
}

// Key is the row's key in the prefixes table.
func (p *PolicyPrefixRow) Key() PrefixKey {
	return PrefixKey{Prefix: p.Prefix.Masked(), InCluster: p.InCluster}
}

// TableHeader implements statedb.TableWritable.
func (*PolicyPrefixRow) TableHeader() []string {
	return []string{"Prefix", "Identity", "InCluster"}
}

// TableRow implements statedb.TableWritable.
func (p *PolicyPrefixRow) TableRow() []string {
	return []string{p.Prefix.String(), p.Identity.String(), fmt.Sprint(p.InCluster)}
}

// prefixKey is the index key of k: the prefix's, then whether it is the
// cluster's.
func prefixKey(k PrefixKey) index.Key {
	key := index.NetIPPrefix(k.Prefix)
	if k.InCluster {
		return append(key, 1)
	}
	return append(key, 0)
}

// PrefixKeyIndex is the prefixes table's primary index, by PrefixKey. Its
// string form is the prefix, followed by " in-cluster" for the cluster's.
var PrefixKeyIndex = statedb.Index[*PolicyPrefixRow, PrefixKey]{
	Name: "prefix",
	FromObject: func(p *PolicyPrefixRow) index.KeySet {
		return index.NewKeySet(prefixKey(p.Key()))
	},
	FromKey: prefixKey,
	FromString: func(s string) (index.Key, error) {
		ps, inCluster := strings.CutSuffix(s, " in-cluster")
		p, err := netip.ParsePrefix(ps)
		if err != nil {
			return nil, fmt.Errorf("policy prefix %q: %w", s, err)
		}
		return prefixKey(PrefixKey{Prefix: p.Masked(), InCluster: inCluster}), nil
	},
	Unique: true,
}

// NewPrefixesTable creates the table of the prefixes that policy rules
// name and registers it with db. The policy engine writes it; the
// ipcache reads it.
func NewPrefixesTable(db *statedb.DB) (statedb.RWTable[*PolicyPrefixRow], error) {
	return statedb.NewTable(db, PrefixesTableName, PrefixKeyIndex)
}
