package k8s

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// Cell provides the load balancer's *loadbalancer.Intake over the
// Kubernetes tables, and the Events it warns Services' authors with;
// neither with Kubernetes off (no *tables.Clients), which leaves the load
// balancer without services.
var Cell = cell.Provide(newIntake, newServiceEvents)

type intakeParams struct {
	cell.In

	Clients        *tables.Clients `optional:"true"`
	Services       statedb.Table[*corev1.Service]
	EndpointSlices statedb.Table[*discoveryv1.EndpointSlice]
	Pods           statedb.Table[*corev1.Pod]
	Nodes          statedb.Table[*corev1.Node]
}

func newIntake(p intakeParams) *loadbalancer.Intake {
	if p.Clients == nil {
		return nil
	}
	return NewIntake(p.Services, p.EndpointSlices, p.Pods, p.Nodes, p.Clients.NodeName)
}

// NewIntake reads Services with their EndpointSlices, the pods of node
// nodeName that name hostPorts, and the node's zone from its Node, from
// their tables.
func NewIntake(services statedb.Table[*corev1.Service], slices statedb.Table[*discoveryv1.EndpointSlice],
	pods statedb.Table[*corev1.Pod], nodes statedb.Table[*corev1.Node], nodeName string) *loadbalancer.Intake {
	return &loadbalancer.Intake{
		Inputs: []loadbalancer.Input{
			loadbalancer.TableInput(services, key[*corev1.Service], serviceName),
			loadbalancer.TableInput(slices, key[*discoveryv1.EndpointSlice], SliceService),
			loadbalancer.TableInput(pods, key[*corev1.Pod], PodService),
			// A Node touches no service itself: the controller reads
			// the zone through Zone.
			loadbalancer.TableInput(nodes, key[*corev1.Node], noService[*corev1.Node]),
		},
		Service: func(txn statedb.ReadTxn, n loadbalancer.ServiceName) (loadbalancer.Service, []loadbalancer.Endpoint, bool) {
			if pod, ok := n.HostPortPod(); ok {
				p, ok := tables.Get(txn, pods, n.Namespace+"/"+pod)
				if !ok {
					return loadbalancer.Service{}, nil, false
				}
				return HostPortService(p, nodeName)
			}
			svc, ok := tables.Get(txn, services, n.String())
			if !ok {
				return loadbalancer.Service{}, nil, false
			}
			var eps []loadbalancer.Endpoint
			for es := range slices.List(txn, tables.ServiceIndex.Query(n.String())) {
				eps = append(eps, Endpoints(es)...)
			}
			return ServiceOf(svc), eps, true
		},
		NodeName: nodeName,
		Zone: func(txn statedb.ReadTxn) string {
			n, ok := tables.Get(txn, nodes, nodeName)
			if !ok {
				return ""
			}
			return n.Labels[corev1.LabelTopologyZone]
		},
	}
}

func noService[T any](T) (loadbalancer.ServiceName, bool) { return loadbalancer.ServiceName{}, false }

// key names an object across its changes: its table's primary key.
func key[T tables.Object](o T) string { return tables.Key(o) }
