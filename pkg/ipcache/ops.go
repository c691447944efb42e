package ipcache

import (
	"context"
	"errors"
	"iter"
	"net/netip"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Map is the datapath's ipcache map; *datapath.Maps is one.
type Map interface {
	UpsertIPCache(netip.Prefix, spec.IPCacheEntry) error
	DeleteIPCache(netip.Prefix) error
	IPCacheEntries() (map[netip.Prefix]spec.IPCacheEntry, error)
}

// MapSource returns the datapath's ipcache map, or nil while the datapath
// has not opened its maps yet.
type MapSource func() Map

// errNoMap is returned while the datapath has not opened its maps yet;
// the reconciler retries.
var errNoMap = errors.New("ipcache map not open yet")

// ops reconciles entries into the map that getMap returns. The map is a
// getter because the datapath opens its maps only when it starts, after
// the reconciler was registered.
type ops struct {
	getMap MapSource
}

// newOps gives the reconciler operations for the map getMap returns
// (nil while there is none yet).
func newOps(getMap MapSource) reconciler.Operations[*EntryRow] {
	return ops{getMap: getMap}
}

func (o ops) mapOrErr() (Map, error) {
	if m := o.getMap(); m != nil {
		return m, nil
	}
	return nil, errNoMap
}

// Update implements reconciler.Operations.
func (o ops) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, e *EntryRow) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	return m.UpsertIPCache(e.Prefix, e.Value())
}

// Delete implements reconciler.Operations.
func (o ops) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, e *EntryRow) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	return m.DeleteIPCache(e.Prefix)
}

// Prune implements reconciler.Operations. It deletes the entries nobody
// wants (left by a previous agent run, or written by hand) and also
// rewrites desired entries that are missing or differ: the map is shared
// with tools and restarts, and incremental updates alone would never
// notice a change made behind the agent's back.
func (o ops) Prune(_ context.Context, _ statedb.ReadTxn, desired iter.Seq2[*EntryRow, statedb.Revision]) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	current, err := m.IPCacheEntries()
	if err != nil {
		return err
	}
	var errs []error
	for e := range desired {
		if cur, ok := current[e.Prefix]; !ok || cur != e.Value() {
			errs = append(errs, m.UpsertIPCache(e.Prefix, e.Value()))
		}
		delete(current, e.Prefix)
	}
	for p := range current {
		errs = append(errs, m.DeleteIPCache(p))
	}
	return errors.Join(errs...)
}
