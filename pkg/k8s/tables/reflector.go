// Package tables holds the Kubernetes objects that the agent watches as
// statedb tables, one table per kind, each filled by one reflector: a
// client-go Reflector (list, then watch, relisting when the watch breaks)
// whose store is the table. Consumers read the tables and wake on their
// watch channels; nothing here knows what the objects mean.
package tables

import (
	"context"
	"fmt"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Object is what a table holds: a Kubernetes object by pointer, never
// changed once it is in the table (a watch event brings a new one).
type Object interface {
	runtime.Object
	metav1.Object
}

// Key is an object's name in its table: "namespace/name", or the name of a
// cluster-scoped object, as client-go's cache keys are.
func Key(o metav1.Object) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + o.GetName()
	}
	return o.GetName()
}

// NameIndex is every table's primary index, by Key.
func NameIndex[T Object]() statedb.Index[T, string] {
	return statedb.Index[T, string]{
		Name:       "name",
		FromObject: func(o T) index.KeySet { return index.NewKeySet(index.String(Key(o))) },
		FromKey:    index.String,
		FromString: index.FromString,
		Unique:     true,
	}
}

// Get is the object named key in t, as of txn.
func Get[T Object](txn statedb.ReadTxn, t statedb.Table[T], key string) (T, bool) {
	o, _, ok := t.Get(txn, NameIndex[T]().Query(key))
	return o, ok
}

// newTable creates a table of T named name, with extra secondary indexes.
func newTable[T Object](db *statedb.DB, name string, secondary ...statedb.Indexer[T]) (statedb.RWTable[T], error) {
	return statedb.NewTableAny(db, name,
		func() []string { return []string{"Name", "ResourceVersion"} },
		func(o T) []string { return []string{Key(o), o.GetResourceVersion()} },
		NameIndex[T](), secondary...)
}

// Reflector fills Table with one kind's objects: it lists them, then
// watches, and lists again whenever the watch breaks.
type Reflector[T Object] struct {
	Table         statedb.RWTable[T]
	ListerWatcher cache.ListerWatcher
	// Transform, if set, trims an object before it goes in (what no
	// consumer reads need not be held).
	Transform func(T) T
}

// prepare registers the table's initializer and returns the reflector's
// name and loop.
func (r Reflector[T]) prepare(db *statedb.DB) (string, func(context.Context)) {
	st := newStore(db, r.Table, r.Transform)
	var example T
	ref := cache.NewReflectorWithOptions(r.ListerWatcher, example, st, cache.ReflectorOptions{Name: r.Table.Name()})
	return "reflect-" + r.Table.Name(), ref.RunWithContext
}

// runner is a Reflector of any kind.
type runner interface {
	prepare(db *statedb.DB) (string, func(context.Context))
}

// store is a Reflector's store that writes into a table: each event is
// one write transaction, and a list (the first, or a relist after the
// watch broke) replaces the table's contents in one. The table counts as
// initialized after the first list, so that a consumer that waits for
// it sees the whole cluster, never a part.
type store[T Object] struct {
	db        *statedb.DB
	tbl       statedb.RWTable[T]
	transform func(T) T
	// initDone marks the table initialized; nil after the first list.
	initDone func(statedb.WriteTxn)
}

func newStore[T Object](db *statedb.DB, tbl statedb.RWTable[T], transform func(T) T) *store[T] {
	txn := db.WriteTxn(tbl)
	done := tbl.RegisterInitializer(txn, tbl.Name()+"-reflector")
	txn.Commit()
	return &store[T]{db: db, tbl: tbl, transform: transform, initDone: done}
}

func (s *store[T]) object(obj any) (T, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("table %s: unexpected object %T", s.tbl.Name(), obj)
	}
	if s.transform != nil {
		o = s.transform(o)
	}
	return o, nil
}

// Add implements cache.ReflectorStore.
func (s *store[T]) Add(obj any) error { return s.Update(obj) }

// Update implements cache.ReflectorStore.
func (s *store[T]) Update(obj any) error {
	o, err := s.object(obj)
	if err != nil {
		return err
	}
	txn := s.db.WriteTxn(s.tbl)
	defer txn.Abort()
	if _, _, err := s.tbl.Insert(txn, o); err != nil {
		return fmt.Errorf("table %s: insert %s: %w", s.tbl.Name(), Key(o), err)
	}
	txn.Commit()
	return nil
}

// Delete implements cache.ReflectorStore.
func (s *store[T]) Delete(obj any) error {
	o, err := s.object(obj)
	if err != nil {
		return err
	}
	txn := s.db.WriteTxn(s.tbl)
	defer txn.Abort()
	if _, _, err := s.tbl.Delete(txn, o); err != nil {
		return fmt.Errorf("table %s: delete %s: %w", s.tbl.Name(), Key(o), err)
	}
	txn.Commit()
	return nil
}

// Replace implements cache.ReflectorStore: the table holds exactly list.
// Objects whose resource version did not change are not rewritten, so
// that a relist wakes only those who care about what changed.
func (s *store[T]) Replace(list []any, _ string) error {
	want := make(map[string]T, len(list))
	for _, obj := range list {
		o, err := s.object(obj)
		if err != nil {
			return err
		}
		want[Key(o)] = o
	}
	txn := s.db.WriteTxn(s.tbl)
	defer txn.Abort()
	for cur := range s.tbl.All(txn) {
		if _, ok := want[Key(cur)]; !ok {
			if _, _, err := s.tbl.Delete(txn, cur); err != nil {
				return fmt.Errorf("table %s: delete %s: %w", s.tbl.Name(), Key(cur), err)
			}
		}
	}
	for k, o := range want {
		if cur, _, ok := s.tbl.Get(txn, NameIndex[T]().Query(k)); ok && cur.GetResourceVersion() == o.GetResourceVersion() && cur.GetResourceVersion() != "" {
			continue
		}
		if _, _, err := s.tbl.Insert(txn, o); err != nil {
			return fmt.Errorf("table %s: insert %s: %w", s.tbl.Name(), k, err)
		}
	}
	if s.initDone != nil {
		s.initDone(txn)
		s.initDone = nil
	}
	txn.Commit()
	return nil
}

// Resync implements cache.ReflectorStore; a table has nothing to replay.
func (s *store[T]) Resync() error { return nil }
