// Package k8s turns Kubernetes objects into the load balancer's
// services: a Service (ServiceOf) with the endpoints of its
// EndpointSlices (Endpoints), and a pod's hostPorts as a service of type
// HostPort (HostPortService). These are pure functions of the objects.
// NewIntake reads them out of the Kubernetes tables of pkg/k8s/tables as
// the load balancer's Intake, with the node's zone (its Node's
// topology.kubernetes.io/zone label), and tells it which service each row
// touches (SliceService, PodService).
package k8s
