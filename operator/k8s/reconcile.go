package k8s

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/cache"
)

// A Reconciler runs a controller's full pass over its informers' caches:
// once they have synced, and again after every change of what they watch
// and, with backoff, after a pass that failed. The operator's controllers
// make each decision with the whole cluster in view: clusters have
// hundreds of nodes and thousands of Services, not millions.
type Reconciler struct {
	informers []cache.SharedIndexInformer
	poke      chan struct{}
}

// NewReconciler wakes on every change that informers see.
func NewReconciler(informers ...cache.SharedIndexInformer) *Reconciler {
	r := &Reconciler{informers: informers, poke: make(chan struct{}, 1)}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.Trigger() },
		UpdateFunc: func(any, any) { r.Trigger() },
		DeleteFunc: func(any) { r.Trigger() },
	}
	for _, inf := range informers {
		// Registering on a fresh informer cannot fail.
		_, _ = inf.AddEventHandler(h)
	}
	return r
}

// Trigger asks for another pass.
func (r *Reconciler) Trigger() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// Run runs the informers and, once they synced, start and then pass
// until ctx ends; a failed pass is retried after 1 s, doubling to 30 s.
func (r *Reconciler) Run(ctx context.Context, log *slog.Logger, what string, start func(), pass func(context.Context) error) error {
	synced := make([]cache.InformerSynced, 0, len(r.informers))
	for _, inf := range r.informers {
		go inf.RunWithContext(ctx)
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("%s caches: %w", what, ctx.Err())
	}
	start()
	retry := time.NewTimer(0)
	defer retry.Stop()
	pause := time.Second
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.poke:
		case <-retry.C:
		}
		err := pass(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn("Controller pass incomplete; retrying", "controller", what, "error", err, "after", pause)
			retry.Reset(pause)
			pause = min(2*pause, 30*time.Second)
		default:
			pause = time.Second
		}
	}
}
