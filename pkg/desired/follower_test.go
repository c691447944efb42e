package desired_test

import (
	"slices"
	"testing"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
)

// A follower's first read gives every row, later reads only the rows
// changed or deleted since; a nil table gives a nil follower, which is no
// input and has no changes.
func TestFollower(t *testing.T) {
	db := statedb.New()
	eps, err := endpoint.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	put := func(ids ...uint16) {
		txn := db.WriteTxn(eps)
		for _, id := range ids {
			if _, _, err := eps.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: id}}); err != nil {
				t.Fatal(err)
			}
		}
		txn.Commit()
	}
	put(1, 2)
	f, err := desired.Follow(db, statedb.Table[*endpoint.EndpointRow](eps))
	if err != nil {
		t.Fatal(err)
	}
	read := func() (changed, deleted []uint16) {
		f.Next(db.ReadTxn(), func(e *endpoint.EndpointRow, gone bool) {
			if gone {
				deleted = append(deleted, e.ID)
			} else {
				changed = append(changed, e.ID)
			}
		})
		return changed, deleted
	}
	if c, d := read(); !slices.Equal(c, []uint16{1, 2}) || d != nil {
		t.Fatalf("first read: changed %v, deleted %v; want every row", c, d)
	}
	put(3)
	txn := db.WriteTxn(eps)
	if _, _, err := eps.Delete(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	if c, d := read(); !slices.Equal(c, []uint16{3}) || !slices.Equal(d, []uint16{1}) {
		t.Fatalf("second read: changed %v, deleted %v; want 3 changed, 1 deleted", c, d)
	}
	if c, d := read(); c != nil || d != nil {
		t.Fatalf("read with nothing new: changed %v, deleted %v", c, d)
	}
	if got := desired.Inputs(f); len(got) != 1 || got[0].Table.Name() != eps.Name() {
		t.Fatalf("inputs of the follower: %v, want its table", got)
	}

	none, err := desired.Follow[*endpoint.EndpointRow](db, nil)
	if err != nil || none != nil {
		t.Fatalf("following no table: %v, %v; want a nil follower", none, err)
	}
	none.Next(db.ReadTxn(), func(*endpoint.EndpointRow, bool) { t.Fatal("a nil follower had a change") })
	if got := desired.Inputs(none); len(got) != 0 {
		t.Fatalf("inputs of a nil follower: %v, want none", got)
	}
}
