package loadbalancer

import (
	"slices"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// row is a table row that names, by key, the service it touches ("" for
// none).
type row struct{ key, svc string }

var rowKey = statedb.Index[row, string]{
	Name:       "key",
	FromObject: func(r row) index.KeySet { return index.NewKeySet(index.String(r.key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// A row touches the service it names now and the one it named when last
// seen: moving, it touches both; dropping its service or going, the one
// it left. A row that came and went between two looks touches nothing.
func TestTableTouches(t *testing.T) {
	db := statedb.New()
	tbl, err := statedb.NewTableAny(db, "rows", func() []string { return nil }, func(row) []string { return nil }, rowKey)
	if err != nil {
		t.Fatal(err)
	}
	in := TableInput[row](tbl, func(r row) string { return r.key }, func(r row) (ServiceName, bool) {
		return ServiceName{Namespace: "ns", Name: r.svc}, r.svc != ""
	})
	tt, err := in.follow(db)
	if err != nil {
		t.Fatal(err)
	}

	write := func(rows []row, deleted ...string) {
		t.Helper()
		txn := db.WriteTxn(tbl)
		for _, r := range rows {
			if _, _, err := tbl.Insert(txn, r); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range deleted {
			if _, _, err := tbl.Delete(txn, row{key: k}); err != nil {
				t.Fatal(err)
			}
		}
		txn.Commit()
	}
	look := func(want ...string) {
		t.Helper()
		var got []string
		for _, n := range tt.next(db.ReadTxn()) {
			got = append(got, n.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("touched %v, want %v", got, want)
		}
	}

	write([]row{{"s", "a"}, {"p", ""}})
	look("a")
	write([]row{{"s", "b"}})
	look("a", "b")
	write([]row{{"s", ""}, {"p", "c"}})
	look("b", "c")
	write(nil, "p")
	look("c")
	write([]row{{"q", "d"}}, "s")
	write(nil, "q")
	look()
}
