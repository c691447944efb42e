package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// ServiceSource is the load balancer's Source: Services and their
// EndpointSlices, and this node's pods that name hostPorts, each as a
// service of type HostPort (see HostPortService). The policy engine reads
// the same Services and EndpointSlices for toServices (StartServices,
// KubeService, ...). All of them are in the tables of pkg/k8s/tables.
type ServiceSource struct {
	nodeName  string
	db        *statedb.DB
	services  statedb.Table[*corev1.Service]
	slices    statedb.Table[*discoveryv1.EndpointSlice]
	pods      statedb.Table[*corev1.Pod]
	mu        sync.Mutex
	listeners []func(loadbalancer.ServiceName)

	// followOnce starts following the tables' changes for the first of
	// Start and StartServices.
	followOnce sync.Once
	followErr  error
}

// NewServiceSource reads Services, EndpointSlices and this node's pods
// from the tables in db.
func NewServiceSource(db *statedb.DB, services statedb.Table[*corev1.Service],
	slices statedb.Table[*discoveryv1.EndpointSlice], pods statedb.Table[*corev1.Pod], nodeName string) *ServiceSource {
	return &ServiceSource{nodeName: nodeName, db: db, services: services, slices: slices, pods: pods}
}

// StartServiceSource is a ServiceSource over tables of its own, filled
// from kube until ctx ends, for users without the agent's hive (tests,
// benchmarks); it returns once they are listed.
func StartServiceSource(ctx context.Context, kube kubernetes.Interface, nodeName string) (*ServiceSource, error) {
	db := statedb.New()
	t, err := tables.Start(ctx, db, &tables.Clients{Kube: kube, NodeName: nodeName})
	if err != nil {
		return nil, err
	}
	return NewServiceSource(db, t.Services, t.EndpointSlices, t.Pods, nodeName), nil
}

type serviceSourceParams struct {
	cell.In

	Config         Config
	Clients        *Clients `optional:"true"`
	DB             *statedb.DB
	Services       statedb.Table[*corev1.Service]
	EndpointSlices statedb.Table[*discoveryv1.EndpointSlice]
	Pods           statedb.Table[*corev1.Pod]
}

func newServiceSource(p serviceSourceParams) *ServiceSource {
	if p.Clients == nil {
		return nil
	}
	return NewServiceSource(p.DB, p.Services, p.EndpointSlices, p.Pods, p.Config.K8sNodeName)
}

// loadBalancerSource is s for the load balancer; nil with Kubernetes
// off (an interface holding a nil *ServiceSource would not be nil).
func loadBalancerSource(s *ServiceSource) loadbalancer.Source {
	if s == nil {
		return nil
	}
	return s
}

// NodeName implements loadbalancer.Source.
func (s *ServiceSource) NodeName() string { return s.nodeName }

// OnChange implements loadbalancer.Source.
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
	_, err3 := tables.Follow(ctx, s.db, s.pods, h)
	return errors.Join(err1, err2, err3)
}

// handler notifies the listeners of the service each event changes.
func (s *ServiceSource) handler() cache.ResourceEventHandler {
	svcName := func(obj any) (loadbalancer.ServiceName, bool) {
		switch o := obj.(type) {
		case *corev1.Service:
			return loadbalancer.ServiceName{Namespace: o.Namespace, Name: o.Name}, true
		case *discoveryv1.EndpointSlice:
			n := o.Labels[discoveryv1.LabelServiceName]
			return loadbalancer.ServiceName{Namespace: o.Namespace, Name: n}, n != ""
		case *corev1.Pod:
			// Only pods that name hostPorts are services; a pod that
			// stops naming them changes its service too (see UpdateFunc).
			return loadbalancer.HostPortName(o.Namespace, o.Name), hasHostPorts(o)
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
			// A pod that drops its hostPorts changes its service.
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

// Start implements loadbalancer.Source: it returns once Services,
// EndpointSlices and pods are listed.
func (s *ServiceSource) Start(ctx context.Context) error {
	if err := s.startFollowing(ctx); err != nil {
		return err
	}
	return s.waitFor(ctx, s.services, s.slices, s.pods)
}

// StartServices is Start for readers other than the load balancer, who
// need Services and EndpointSlices only: it returns once they are listed.
// OnChange's listeners hear of them.
func (s *ServiceSource) StartServices(ctx context.Context) error {
	if err := s.startFollowing(ctx); err != nil {
		return err
	}
	return s.waitFor(ctx, s.services, s.slices)
}

// Services implements loadbalancer.Source.
func (s *ServiceSource) Services() []loadbalancer.ServiceName {
	var out []loadbalancer.ServiceName
	txn := s.db.ReadTxn()
	for o := range s.services.All(txn) {
		out = append(out, loadbalancer.ServiceName{Namespace: o.Namespace, Name: o.Name})
	}
	for p := range s.pods.All(txn) {
		if hasHostPorts(p) {
			out = append(out, loadbalancer.HostPortName(p.Namespace, p.Name))
		}
	}
	return out
}

// Service implements loadbalancer.Source.
func (s *ServiceSource) Service(n loadbalancer.ServiceName) (loadbalancer.Service, []loadbalancer.Endpoint, bool) {
	if pod, ok := n.HostPortPod(); ok {
		p, ok := get(s.db, s.pods, n.Namespace+"/"+pod)
		if !ok {
			return loadbalancer.Service{}, nil, false
		}
		return HostPortService(p, s.nodeName)
	}
	svc, ok := get(s.db, s.services, n.String())
	if !ok {
		return loadbalancer.Service{}, nil, false
	}
	var eps []loadbalancer.Endpoint
	for _, es := range s.EndpointSlices(n.Namespace, n.Name) {
		eps = append(eps, Endpoints(es)...)
	}
	return ServiceOf(svc), eps, true
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

// ServiceOf reads what the load balancer needs of a Service.
func ServiceOf(svc *corev1.Service) loadbalancer.Service {
	s := loadbalancer.Service{
		Name:      loadbalancer.ServiceName{Namespace: svc.Namespace, Name: svc.Name},
		Type:      loadbalancer.ServiceType(svc.Spec.Type),
		ProxyName: svc.Labels["service.kubernetes.io/service-proxy-name"],
		Headless:  svc.Spec.ClusterIP == corev1.ClusterIPNone,
		// Which of two Services claiming a frontend gets it.
		CreationTime: svc.CreationTimestamp.Time,
		UID:          string(svc.UID),
	}
	if s.Type == "" {
		s.Type = loadbalancer.TypeClusterIP
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	s.ClusterIPs = addrs(ips)
	s.ExternalIPs = addrs(svc.Spec.ExternalIPs)
	for _, p := range svc.Spec.Ports {
		s.Ports = append(s.Ports, loadbalancer.Port{Name: p.Name, Protocol: protocol(p.Protocol),
			Port: uint16(p.Port), NodePort: uint16(p.NodePort)})
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		s.AffinityTimeout = uint32(corev1.DefaultClientIPServiceAffinitySeconds)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			s.AffinityTimeout = uint32(*c.ClientIP.TimeoutSeconds)
		}
	}
	s.ExternalLocal = svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		(s.Type == loadbalancer.TypeNodePort || s.Type == loadbalancer.TypeLoadBalancer || len(s.ExternalIPs) > 0)
	s.InternalLocal = svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	s.PreferSameNode = svc.Spec.TrafficDistribution != nil &&
		(*svc.Spec.TrafficDistribution == corev1.ServiceTrafficDistributionPreferSameNode)
	s.HealthCheckNodePort = uint16(svc.Spec.HealthCheckNodePort)
	return s
}

// Endpoints reads an EndpointSlice's IPv4 endpoints.
func Endpoints(es *discoveryv1.EndpointSlice) []loadbalancer.Endpoint {
	if es.AddressType != discoveryv1.AddressTypeIPv4 {
		return nil
	}
	ports := map[loadbalancer.PortKey]uint16{}
	for _, p := range es.Ports {
		if p.Port == nil {
			continue
		}
		k := loadbalancer.PortKey{Protocol: spec.ProtoTCP}
		if p.Name != nil {
			k.Name = *p.Name
		}
		if p.Protocol != nil {
			k.Protocol = protocol(*p.Protocol)
		}
		ports[k] = uint16(*p.Port)
	}
	var out []loadbalancer.Endpoint
	for _, e := range es.Endpoints {
		c := e.Conditions
		ep := loadbalancer.Endpoint{Ports: ports,
			// A nil condition counts as true for ready and serving.
			Ready:       c.Ready == nil || *c.Ready,
			Serving:     c.Serving == nil || *c.Serving,
			Terminating: c.Terminating != nil && *c.Terminating,
		}
		if e.NodeName != nil {
			ep.NodeName = *e.NodeName
		}
		if e.Hints != nil {
			for _, n := range e.Hints.ForNodes {
				ep.ForNodes = append(ep.ForNodes, n.Name)
			}
		}
		for _, a := range addrs(e.Addresses) {
			ep.Address = a
			out = append(out, ep)
		}
	}
	return out
}

func addrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			out = append(out, a)
		}
	}
	return out
}

func protocol(p corev1.Protocol) uint8 {
	switch p {
	case corev1.ProtocolUDP:
		return spec.ProtoUDP
	case corev1.ProtocolSCTP:
		return spec.ProtoSCTP
	}
	return spec.ProtoTCP
}
