package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium-go/cilium/operator/ipam/pool"
	"github.com/cilium-go/cilium/operator/k8s"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	ciliumclient "github.com/cilium-go/cilium/pkg/k8s/client"
)

// Allocator keeps CiliumNodes in step with Nodes. It reconciles the whole
// set on every change: clusters have hundreds of nodes, not millions, and a
// full pass makes each decision with every CIDR in view.
type Allocator struct {
	log    *slog.Logger
	c      k8s.Clients
	pool   *pool.Pool
	nodes  cache.SharedIndexInformer
	cnodes cache.SharedIndexInformer
	r      *k8s.Reconciler
}

// NewAllocator allocates from p, which must be empty: Run fills it from
// the existing CiliumNodes first.
func NewAllocator(log *slog.Logger, c k8s.Clients, p *pool.Pool) *Allocator {
	a := &Allocator{log: log, c: c, pool: p}
	a.nodes = informers.NewSharedInformerFactory(c.Kube, 0).Core().V1().Nodes().Informer()
	a.cnodes = ciliumclient.NewCiliumNodeInformer(c.Cilium, 0, nil)
	a.r = k8s.NewReconciler(a.nodes, a.cnodes)
	return a
}

// Run rebuilds the pool and reconciles until ctx ends.
func (a *Allocator) Run(ctx context.Context) error {
	return a.r.Run(ctx, a.log, "Cluster-pool IPAM", a.rebuild, a.reconcile)
}

// rebuild takes the CIDRs recorded in CiliumNodes into the pool. A CIDR
// that is outside the pool or claimed twice is not taken; reconcile gives
// that node a fresh one.
func (a *Allocator) rebuild() {
	cns := a.ciliumNodes()
	// Oldest first, so on a duplicate the node that had it first keeps it.
	slices.SortFunc(cns, func(x, y *v2.CiliumNode) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return compareStrings(x.Name, y.Name)
	})
	for _, cn := range cns {
		for _, s := range cn.Spec.IPAM.PodCIDRs {
			p, err := netip.ParsePrefix(s)
			if err == nil {
				err = a.pool.Occupy(cn.Name, p)
			}
			if err != nil {
				a.log.Warn("Not keeping pod CIDR of CiliumNode", "node", cn.Name, "cidr", s, "error", err)
			}
		}
	}
	a.log.Info("Cluster-pool IPAM restored", "pool", a.pool.String(), "nodes", len(a.pool.Owners()))
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (a *Allocator) ciliumNodes() []*v2.CiliumNode {
	var out []*v2.CiliumNode
	for _, o := range a.cnodes.GetStore().List() {
		out = append(out, o.(*v2.CiliumNode))
	}
	return out
}

// reconcile frees what deleted nodes held before allocating, so a freed CIDR
// can go to a new node in the same pass.
func (a *Allocator) reconcile(ctx context.Context) error {
	nodes := map[string]*corev1.Node{}
	for _, o := range a.nodes.GetStore().List() {
		n := o.(*corev1.Node)
		nodes[n.Name] = n
	}
	cns := map[string]*v2.CiliumNode{}
	for _, cn := range a.ciliumNodes() {
		cns[cn.Name] = cn
	}
	var errs []error
	for owner := range a.pool.Owners() {
		if nodes[owner] == nil {
			a.pool.Release(owner)
			a.log.Info("Released pod CIDR of deleted node", "node", owner)
		}
	}
	for name, cn := range cns {
		if nodes[name] != nil {
			continue
		}
		err := a.c.Cilium.CiliumV2().CiliumNodes().Delete(ctx, name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &cn.UID}})
		if err != nil && !k8serrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete CiliumNode %s: %w", name, err))
		}
	}
	for _, name := range sortedKeys(nodes) {
		if err := a.ensure(ctx, nodes[name], cns[name]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ensure gives node its CIDR in a CiliumNode it owns.
func (a *Allocator) ensure(ctx context.Context, node *corev1.Node, cn *v2.CiliumNode) error {
	cidr, err := a.pool.Allocate(node.Name)
	if err != nil {
		return err
	}
	want := []string{cidr.String()}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	api := a.c.Cilium.CiliumV2().CiliumNodes()
	if cn == nil {
		cn = &v2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: node.Name, OwnerReferences: []metav1.OwnerReference{owner}}}
		cn.Spec.IPAM.PodCIDRs = want
		_, err := api.Create(ctx, cn, metav1.CreateOptions{})
		switch {
		case k8serrors.IsAlreadyExists(err):
			return nil // our cache lags our own create; its event brings us back
		case err != nil:
			return fmt.Errorf("create CiliumNode %s: %w", node.Name, err)
		}
		a.log.Info("Allocated pod CIDR", "node", node.Name, "cidr", want[0])
		return nil
	}
	if slices.Equal(cn.Spec.IPAM.PodCIDRs, want) && hasOwner(cn, owner) {
		return nil
	}
	upd := cn.DeepCopy()
	upd.Spec.IPAM.PodCIDRs = want
	// A reference to an earlier Node of the same name would keep the
	// CiliumNode alive past this one's deletion.
	upd.OwnerReferences = slices.DeleteFunc(upd.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.APIVersion == "v1" && r.Kind == "Node"
	})
	upd.OwnerReferences = append(upd.OwnerReferences, owner)
	if _, err := api.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update CiliumNode %s: %w", node.Name, err)
	}
	a.log.Info("Allocated pod CIDR", "node", node.Name, "cidr", want[0], "previous", cn.Spec.IPAM.PodCIDRs)
	return nil
}

func hasOwner(cn *v2.CiliumNode, o metav1.OwnerReference) bool {
	return slices.ContainsFunc(cn.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.Kind == o.Kind && r.Name == o.Name && r.UID == o.UID
	})
}
