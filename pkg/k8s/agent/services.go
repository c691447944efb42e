package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
)

// ServiceSource is the Services and EndpointSlices that the policy
// engine reads for toServices (StartServices, KubeService, ...), from the
// tables of pkg/k8s/tables. The load balancer reads the tables itself
// (pkg/loadbalancer/k8s).
type ServiceSource struct {
	db        *statedb.DB
	services  statedb.Table[*corev1.Service]
	slices    statedb.Table[*discoveryv1.EndpointSlice]
	mu        sync.Mutex
	listeners []func(loadbalancer.ServiceName)

	// followOnce starts following the tables' changes for the first
	// caller of StartServices.
	followOnce sync.Once
	followErr  error
}

// NewServiceSource reads Services and EndpointSlices from the tables in
// db.
func NewServiceSource(db *statedb.DB, services statedb.Table[*corev1.Service],
	slices statedb.Table[*discoveryv1.EndpointSlice]) *ServiceSource {
	return &ServiceSource{db: db, services: services, slices: slices}
}

type serviceSourceParams struct {
	cell.In

	Clients        *Clients `optional:"true"`
	DB             *statedb.DB
	Services       statedb.Table[*corev1.Service]
	EndpointSlices statedb.Table[*discoveryv1.EndpointSlice]
}

func newServiceSource(p serviceSourceParams) *ServiceSource {
	if p.Clients == nil {
		return nil
	}
	return NewServiceSource(p.DB, p.Services, p.EndpointSlices)
}

// OnChange calls fn with the name of each Service whose object or
// EndpointSlices changed, once StartServices started. fn must not block.
func (s *ServiceSource) OnChange(fn func(loadbalancer.ServiceName)) {
	s.mu.Lock()
	s.listeners = append(s.listeners, fn)
	s.mu.Unlock()
}

func (s *ServiceSource) notify(n loadbalancer.ServiceName) {
	s.mu.Lock()
	ls := s.listeners
	s.mu.Unlock()
	for _, fn := range ls {
		fn(n)
	}
}

// follow tells the listeners of every Service that a change of the
// tables touches, until ctx ends.
func (s *ServiceSource) follow(ctx context.Context) error {
	h := s.handler()
	_, err1 := tables.Follow(ctx, s.db, s.services, h)
	_, err2 := tables.Follow(ctx, s.db, s.slices, h)
	return errors.Join(err1, err2)
}

// handler notifies the listeners of the service each event changes.
func (s *ServiceSource) handler() cache.ResourceEventHandler {
	svcName := func(obj any) (loadbalancer.ServiceName, bool) {
		switch o := obj.(type) {
		case *corev1.Service:
			return loadbalancer.ServiceName{Namespace: o.Namespace, Name: o.Name}, true
		case *discoveryv1.EndpointSlice:
			return lbk8s.SliceService(o)
		}
		return loadbalancer.ServiceName{}, false
	}
	changed := func(obj any) {
		if n, ok := svcName(obj); ok {
			s.notify(n)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, cur any) {
			// A slice that moves to another service changes both.
			on, oldOK := svcName(old)
			cn, curOK := svcName(cur)
			if oldOK && (cn != on || !curOK) {
				s.notify(on)
			}
			changed(cur)
		},
		DeleteFunc: changed,
	}
}

// waitFor returns once every table in ts holds its first list.
func (s *ServiceSource) waitFor(ctx context.Context, ts ...statedb.TableMeta) error {
	for _, t := range ts {
		_, initialized := t.Initialized(s.db.ReadTxn())
		select {
		case <-initialized:
		case <-ctx.Done():
			return fmt.Errorf("table %s not listed: %w", t.Name(), ctx.Err())
		}
	}
	return nil
}

// startFollowing starts following the tables once; it follows until the
// ctx of the first caller ends (the agent's jobs share one lifetime).
func (s *ServiceSource) startFollowing(ctx context.Context) error {
	s.followOnce.Do(func() { s.followErr = s.follow(ctx) })
	return s.followErr
}

// StartServices starts following Services and EndpointSlices and returns
// once they are listed. OnChange's listeners hear of their changes.
func (s *ServiceSource) StartServices(ctx context.Context) error {
	if err := s.startFollowing(ctx); err != nil {
		return err
	}
	return s.waitFor(ctx, s.services, s.slices)
}

// KubeService returns the Service namespace/name.
func (s *ServiceSource) KubeService(namespace, name string) (*corev1.Service, bool) {
	return get(s.db, s.services, namespace+"/"+name)
}

// KubeServices lists the Services of a namespace, of every namespace for
// "".
func (s *ServiceSource) KubeServices(namespace string) []*corev1.Service {
	txn := s.db.ReadTxn()
	if namespace == "" {
		return statedb.Collect(s.services.All(txn))
	}
	return statedb.Collect(s.services.Prefix(txn, tables.NameIndex[*corev1.Service]().Query(namespace+"/")))
}

// EndpointSlices lists the EndpointSlices of the Service namespace/name.
func (s *ServiceSource) EndpointSlices(namespace, name string) []*discoveryv1.EndpointSlice {
	return statedb.Collect(s.slices.List(s.db.ReadTxn(), tables.ServiceIndex.Query(namespace+"/"+name)))
}

// Endpoints reads an EndpointSlice's IPv4 endpoints: pkg/policy/k8s's
// name for lbk8s.Endpoints until it reads the tables itself.
var Endpoints = lbk8s.Endpoints
