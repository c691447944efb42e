package agent

import (
	"context"
	"time"

	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/policy"
)

// cidrGroupCache is the CIDRGroups of an informer's cache.
type cidrGroupCache struct{ lister client.CiliumCIDRGroupLister }

func (c cidrGroupCache) CIDRGroup(name string) (*v2.CiliumCIDRGroup, bool) {
	g, err := c.lister.Get(name)
	return g, err == nil
}

func (c cidrGroupCache) ListCIDRGroups() []*v2.CiliumCIDRGroup {
	gs, _ := c.lister.List(k8slabels.Everything())
	return gs
}

// watchCIDRGroups starts the informer of CiliumCIDRGroups, which the
// translations read, and waits until it listed them all. Each change of
// a group translates again the policies that name it (by name or by a
// selector): the informer's cache already holds the change, or no longer
// the group, when its handler runs.
func (a *Agent) watchCIDRGroups(ctx context.Context) error {
	inf := client.NewCiliumCIDRGroupInformer(a.clients.Cilium, 10*time.Minute, nil)
	a.cluster.CIDRGroups = cidrGroupCache{client.NewLister[*v2.CiliumCIDRGroup](inf, v2.CCGPluralName)}
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
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	})
	if err != nil {
		return err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return context.Cause(ctx)
	}
	return nil
}
