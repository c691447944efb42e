package k8s

import (
	"context"
	"sync"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// ServiceEvents records the load balancer's warnings as Events on the
// Services they are about, and on the pods of HostPort services: the
// agent's loadbalancer.Events.
type ServiceEvents struct {
	kube     kubernetes.Interface
	db       *statedb.DB
	services statedb.Table[*corev1.Service]
	pods     statedb.Table[*corev1.Pod]
	node     string

	mu       sync.Mutex
	recorder record.EventRecorder // nil until Start
}

// NewServiceEvents records through kube once started; the objects' UIDs
// come from the tables of Services and pods in db.
func NewServiceEvents(kube kubernetes.Interface, db *statedb.DB, services statedb.Table[*corev1.Service],
	pods statedb.Table[*corev1.Pod], node string) *ServiceEvents {
	return &ServiceEvents{kube: kube, db: db, services: services, pods: pods, node: node}
}

// Start sends the events to the API server until ctx ends.
func (e *ServiceEvents) Start(ctx context.Context) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.kube.CoreV1().Events("")})
	e.mu.Lock()
	e.recorder = b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "cilium-agent", Host: e.node})
	e.mu.Unlock()
}

type serviceEventsParams struct {
	cell.In

	Lifecycle cell.Lifecycle
	Clients   *tables.Clients `optional:"true"`
	DB        *statedb.DB
	Services  statedb.Table[*corev1.Service]
	Pods      statedb.Table[*corev1.Pod]
}

func newServiceEvents(p serviceEventsParams) loadbalancer.Events {
	if p.Clients == nil {
		return nil
	}
	e := NewServiceEvents(p.Clients.Kube, p.DB, p.Services, p.Pods, p.Clients.NodeName)
	ctx, cancel := context.WithCancel(context.Background())
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error { e.Start(ctx); return nil },
		OnStop:  func(cell.HookContext) error { cancel(); return nil },
	})
	return e
}

// Warn implements loadbalancer.Events. An object already gone from the
// tables, or a warning before Start, gets no event: nobody would read it.
func (e *ServiceEvents) Warn(n loadbalancer.ServiceName, reason, message string) {
	e.mu.Lock()
	rec := e.recorder
	e.mu.Unlock()
	if rec == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: n.Namespace, Name: n.Name}
	txn := e.db.ReadTxn()
	if pod, ok := n.HostPortPod(); ok {
		p, ok := tables.Get(txn, e.pods, n.Namespace+"/"+pod)
		if !ok {
			return
		}
		ref.Kind, ref.Name, ref.UID, ref.ResourceVersion = "Pod", pod, p.UID, p.ResourceVersion
	} else {
		svc, ok := tables.Get(txn, e.services, n.String())
		if !ok {
			return
		}
		ref.UID, ref.ResourceVersion = svc.UID, svc.ResourceVersion
	}
	rec.Event(ref, corev1.EventTypeWarning, reason, message)
}
