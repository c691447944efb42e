// Package lbipam is the operator's LB-IPAM: LoadBalancer Services get
// addresses from CiliumLoadBalancerIPPools, written into their
// status.loadBalancer.ingress, where every agent serves them. The
// Services' status is the only record of who has what: a new leader reads
// it back before handing out anything, so failover and restarts move no
// address and give none twice.
package lbipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium-go/cilium/operator/crdinstall"
	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/leader"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	ciliumclient "github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/lbipam"
	lbipamk8s "github.com/cilium-go/cilium/pkg/lbipam/k8s"
)

// Cell runs LB-IPAM on the leader.
var Cell = cell.Module("lb-ipam", "LoadBalancer addresses from CiliumLoadBalancerIPPools",
	cell.Config(DefaultConfig),
	cell.Invoke(Config.Validate),
	cell.Provide(newController),
)

// Config turns LB-IPAM on and says which Services it serves, with
// Cilium's flags.
type Config struct {
	EnableLBIPAM bool `mapstructure:"enable-lb-ipam"`
	// DefaultLBServiceIPAM is who serves a Service without a
	// loadBalancerClass: "lbipam" or "none".
	DefaultLBServiceIPAM string `mapstructure:"default-lb-service-ipam"`
	// EnableL2Announcements is the agents' flag, from the same
	// ConfigMap: with it, LB-IPAM also serves the class
	// io.cilium/l2-announcer, whose addresses the agents announce.
	EnableL2Announcements bool `mapstructure:"enable-l2-announcements"`
}

// DefaultConfig: on, for Services without a class.
var DefaultConfig = Config{EnableLBIPAM: true, DefaultLBServiceIPAM: "lbipam"}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("enable-lb-ipam", d.EnableLBIPAM, "hand out LoadBalancer addresses from CiliumLoadBalancerIPPools")
	fs.String("default-lb-service-ipam", d.DefaultLBServiceIPAM,
		"who hands out addresses to LoadBalancer Services without a loadBalancerClass: lbipam or none")
	fs.Bool("enable-l2-announcements", d.EnableL2Announcements,
		"the agents announce LoadBalancer addresses over L2: serve the loadBalancerClass io.cilium/l2-announcer too")
}

// classes are the loadBalancerClasses LB-IPAM serves.
func (c Config) classes() []string {
	if c.EnableL2Announcements {
		return []string{v2alpha1.L2AnnounceLoadBalancerClass}
	}
	return nil
}

// Validate names the flag whose value is bad.
func (c Config) Validate() error {
	if c.DefaultLBServiceIPAM != "lbipam" && c.DefaultLBServiceIPAM != "none" {
		return fmt.Errorf("--default-lb-service-ipam %q: want lbipam or none", c.DefaultLBServiceIPAM)
	}
	return nil
}

func newController(log *slog.Logger, cfg Config, c k8s.Clients, crds *crdinstall.Installed) leader.Out {
	return leader.Out{Controller: leader.Controller{Name: "lb-ipam", Run: func(ctx context.Context) error {
		if !cfg.EnableLBIPAM {
			<-ctx.Done()
			return nil
		}
		if err := crds.Wait(ctx); err != nil {
			return err
		}
		return New(log, c, cfg).Run(ctx)
	}}}
}

// Controller keeps the Services' addresses and the pools' status in step
// with the pools and Services, in a full pass on every change.
type Controller struct {
	log      *slog.Logger
	c        k8s.Clients
	cfg      Config
	services cache.SharedIndexInformer
	pools    cache.SharedIndexInformer
	r        *k8s.Reconciler
}

// New watches Services and pools through c.
func New(log *slog.Logger, c k8s.Clients, cfg Config) *Controller {
	l := &Controller{log: log, c: c, cfg: cfg}
	l.services = informers.NewSharedInformerFactory(c.Kube, 0).Core().V1().Services().Informer()
	l.pools = ciliumclient.NewInformer(c.Cilium, c.Cilium.CiliumV2().CiliumLoadBalancerIPPools(), &v2.CiliumLoadBalancerIPPool{}, 0, nil)
	l.r = k8s.NewReconciler(l.services, l.pools)
	return l
}

// Run reconciles until ctx ends.
func (l *Controller) Run(ctx context.Context) error {
	return l.r.Run(ctx, l.log, "LB-IPAM", func() {}, l.reconcile)
}

// reconcile allocates from scratch over the record (the Services'
// status) and writes what differs: the Services' status first, so that
// an address a Service lets go is free in the API before a pool's counts
// say so.
func (l *Controller) reconcile(ctx context.Context) error {
	var (
		errs    []error
		pools   []lbipam.Pool
		objs    = map[string]*v2.CiliumLoadBalancerIPPool{}
		svcs    []lbipam.Service
		byName  = map[lbipam.Name]*corev1.Service{}
		refused []lbipam.Assignment
	)
	for _, o := range l.pools.GetStore().List() {
		p := o.(*v2.CiliumLoadBalancerIPPool)
		pool, err := lbipamk8s.PoolOf(p)
		if err != nil {
			// The API server checks the CIDRs' form; a range it let
			// through that is not one leaves the pool out.
			l.log.Warn("Not using pool", "error", err)
			continue
		}
		pools, objs[p.Name] = append(pools, pool), p
	}
	for _, o := range l.services.GetStore().List() {
		svc := o.(*corev1.Service)
		if !lbipamk8s.Ours(svc, l.cfg.DefaultLBServiceIPAM == "lbipam", l.cfg.classes()) {
			continue
		}
		n := lbipam.Name{Namespace: svc.Namespace, Name: svc.Name}
		byName[n] = svc
		s, err := lbipamk8s.ServiceOf(svc)
		if err != nil {
			refused = append(refused, lbipam.Assignment{Service: n, Reason: lbipam.ReasonNoPool, Message: err.Error()})
			continue
		}
		svcs = append(svcs, s)
	}
	assigned, statuses := lbipam.Allocate(pools, svcs)
	for _, a := range append(assigned, refused...) {
		errs = append(errs, l.writeService(ctx, byName[a.Service], a))
	}
	for _, st := range statuses {
		errs = append(errs, l.writePool(ctx, objs[st.Name], st))
	}
	return errors.Join(errs...)
}

func (l *Controller) writeService(ctx context.Context, svc *corev1.Service, a lbipam.Assignment) error {
	st, changed := lbipamk8s.ServiceStatus(svc, a)
	if !changed {
		return nil
	}
	upd := svc.DeepCopy()
	upd.Status = st
	_, err := l.c.Kube.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	switch {
	case k8serrors.IsNotFound(err), k8serrors.IsConflict(err):
		return nil // gone or changed: its event brings us back
	case err != nil:
		return fmt.Errorf("service %s status: %w", a.Service, err)
	}
	l.log.Info("LoadBalancer addresses", "service", a.Service.String(), "addresses", a.Addrs, "reason", a.Reason, "message", a.Message)
	return nil
}

func (l *Controller) writePool(ctx context.Context, p *v2.CiliumLoadBalancerIPPool, st lbipam.PoolStatus) error {
	conds, changed := lbipamk8s.PoolConditions(p, st)
	if !changed {
		return nil
	}
	upd := p.DeepCopy()
	upd.Status.Conditions = slices.Clone(conds)
	_, err := l.c.Cilium.CiliumV2().CiliumLoadBalancerIPPools().UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	switch {
	case k8serrors.IsNotFound(err), k8serrors.IsConflict(err):
		return nil
	case err != nil:
		return fmt.Errorf("pool %s status: %w", p.Name, err)
	}
	return nil
}
