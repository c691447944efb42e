package agent

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// serviceNameIndex indexes EndpointSlices by the Service they belong to.
const serviceNameIndex = "service"

// ServiceSource is the load balancer's Source: Services and their
// EndpointSlices, and this node's pods that name hostPorts, each as a
// service of type HostPort (see HostPortService); watched only once the
// load balancer starts it. The policy engine reads the same Services and
// EndpointSlices for toServices (StartServices, KubeService, ...): the
// agent watches them once, for both.
type ServiceSource struct {
	nodeName  string
	services  cache.SharedIndexInformer
	slices    cache.SharedIndexInformer
	pods      cache.SharedIndexInformer
	mu        sync.Mutex
	listeners []func(loadbalancer.ServiceName)

	// runOnce starts the Service and EndpointSlice informers for the
	// first of Start and StartServices.
	runOnce sync.Once
	runErr  error
}

// NewServiceSource builds the informers; nothing is watched before Start.
func NewServiceSource(c *Clients, nodeName string) *ServiceSource {
	f := kubeinformers.NewSharedInformerFactory(c.Kube, resync)
	local := kubeinformers.NewSharedInformerFactoryWithOptions(c.Kube, resync,
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
		}))
	s := &ServiceSource{nodeName: nodeName, services: f.Core().V1().Services().Informer(),
		slices: f.Discovery().V1().EndpointSlices().Informer(), pods: local.Core().V1().Pods().Informer()}
	_ = s.slices.AddIndexers(cache.Indexers{serviceNameIndex: func(obj any) ([]string, error) {
		if es, ok := obj.(*discoveryv1.EndpointSlice); ok {
			if n := es.Labels[discoveryv1.LabelServiceName]; n != "" {
				return []string{es.Namespace + "/" + n}, nil
			}
		}
		return nil, nil
	}})
	return s
}

func newServiceSource(cfg Config, c *Clients) *ServiceSource {
	if c == nil {
		return nil
	}
	return NewServiceSource(c, cfg.K8sNodeName)
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

// handler notifies the listeners of the service each event changes.
func (s *ServiceSource) handler() cache.ResourceEventHandler {
	svcName := func(obj any) (loadbalancer.ServiceName, bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
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

// runServices starts the Service and EndpointSlice informers once; they
// run until the ctx of the first caller ends (the agent's jobs share one
// lifetime).
func (s *ServiceSource) runServices(ctx context.Context) error {
	s.runOnce.Do(func() {
		for _, inf := range []cache.SharedIndexInformer{s.services, s.slices} {
			if _, err := inf.AddEventHandler(s.handler()); err != nil {
				s.runErr = err
				return
			}
			go inf.RunWithContext(ctx)
		}
	})
	return s.runErr
}

// Start implements loadbalancer.Source: the informers run until ctx ends.
func (s *ServiceSource) Start(ctx context.Context) error {
	if err := s.runServices(ctx); err != nil {
		return err
	}
	if _, err := s.pods.AddEventHandler(s.handler()); err != nil {
		return err
	}
	go s.pods.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), s.services.HasSynced, s.slices.HasSynced, s.pods.HasSynced) {
		return errors.New("services, endpoint slices and pods not synced")
	}
	return nil
}

// StartServices watches Services and EndpointSlices only, without the
// pods of hostPorts, for readers other than the load balancer; it
// returns once they are listed. OnChange's listeners hear of them.
func (s *ServiceSource) StartServices(ctx context.Context) error {
	if err := s.runServices(ctx); err != nil {
		return err
	}
	if !cache.WaitForCacheSync(ctx.Done(), s.services.HasSynced, s.slices.HasSynced) {
		return errors.New("services and endpoint slices not synced")
	}
	return nil
}

// Services implements loadbalancer.Source.
func (s *ServiceSource) Services() []loadbalancer.ServiceName {
	var out []loadbalancer.ServiceName
	for _, o := range listAs[*corev1.Service](s.services) {
		out = append(out, loadbalancer.ServiceName{Namespace: o.Namespace, Name: o.Name})
	}
	for _, p := range listAs[*corev1.Pod](s.pods) {
		if hasHostPorts(p) {
			out = append(out, loadbalancer.HostPortName(p.Namespace, p.Name))
		}
	}
	return out
}

// Service implements loadbalancer.Source.
func (s *ServiceSource) Service(n loadbalancer.ServiceName) (loadbalancer.Service, []loadbalancer.Endpoint, bool) {
	if pod, ok := n.HostPortPod(); ok {
		obj, ok, err := s.pods.GetStore().GetByKey(n.Namespace + "/" + pod)
		if err != nil || !ok {
			return loadbalancer.Service{}, nil, false
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return loadbalancer.Service{}, nil, false
		}
		return HostPortService(p, s.nodeName)
	}
	obj, ok, err := s.services.GetStore().GetByKey(n.String())
	if err != nil || !ok {
		return loadbalancer.Service{}, nil, false
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return loadbalancer.Service{}, nil, false
	}
	var eps []loadbalancer.Endpoint
	for _, es := range s.EndpointSlices(n.Namespace, n.Name) {
		eps = append(eps, Endpoints(es)...)
	}
	return ServiceOf(svc), eps, true
}

// KubeService returns the Service namespace/name from the cache.
func (s *ServiceSource) KubeService(namespace, name string) (*corev1.Service, bool) {
	obj, ok, err := s.services.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	svc, ok := obj.(*corev1.Service)
	return svc, ok
}

// KubeServices lists the cached Services of a namespace, of every
// namespace for "".
func (s *ServiceSource) KubeServices(namespace string) []*corev1.Service {
	if namespace == "" {
		return listAs[*corev1.Service](s.services)
	}
	objs, _ := s.services.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	out := make([]*corev1.Service, 0, len(objs))
	for _, o := range objs {
		if svc, ok := o.(*corev1.Service); ok {
			out = append(out, svc)
		}
	}
	return out
}

// EndpointSlices lists the cached EndpointSlices of the Service
// namespace/name.
func (s *ServiceSource) EndpointSlices(namespace, name string) []*discoveryv1.EndpointSlice {
	objs, _ := s.slices.GetIndexer().ByIndex(serviceNameIndex, namespace+"/"+name)
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if es, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, es)
		}
	}
	return out
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
