package agent

import (
	"context"

	"github.com/cilium/statedb"
	"k8s.io/client-go/tools/cache"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/policy"
)

// cidrGroupTable is the CIDRGroups of the cluster's table of them.
type cidrGroupTable struct {
	db *statedb.DB
	t  statedb.Table[*v2.CiliumCIDRGroup]
}

func (c cidrGroupTable) CIDRGroup(name string) (*v2.CiliumCIDRGroup, bool) {
	return tables.Get(c.db.ReadTxn(), c.t, name)
}

func (c cidrGroupTable) ListCIDRGroups() []*v2.CiliumCIDRGroup {
	return statedb.Collect(c.t.All(c.db.ReadTxn()))
}

// watchCIDRGroups follows the table of CiliumCIDRGroups, which the
// translations read, and waits until it listed them all. Each change of
// a group translates again the policies that name it (by name or by a
// selector): the table already holds the change, or no longer the group,
// when its handler runs.
func (a *Agent) watchCIDRGroups(ctx context.Context) error {
	db, t := a.watchers.DB(), a.watchers.Tables().CIDRGroups
	a.cluster.CIDRGroups = cidrGroupTable{db, t}
	changed := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		a.do(func(e *policy.Engine) {
			for origin, dp := range a.depPolicies {
				if dp.refs.ConcernsCIDRGroup(key) {
					a.translateAgain(e, origin, dp)
				}
			}
		})
	}
	synced, err := tables.Follow(ctx, db, t, cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	})
	if err != nil {
		return err
	}
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
