package api

// Service selects Kubernetes Services, whose backends become peers of an
// egress rule: by name (K8sService) or by their labels
// (K8sServiceSelector). Exactly one of the two is set.
type Service struct {
	K8sServiceSelector *K8sServiceSelectorNamespace `json:"k8sServiceSelector,omitempty"`
	K8sService         *K8sServiceNamespace         `json:"k8sService,omitempty"`
}

// K8sServiceNamespace names a Service. An empty Namespace is every
// namespace, in a CiliumNetworkPolicy too, as in Cilium.
type K8sServiceNamespace struct {
	ServiceName string `json:"serviceName,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
}

// K8sServiceSelectorNamespace selects Services by their labels, in
// Namespace (empty: as in K8sServiceNamespace).
type K8sServiceSelectorNamespace struct {
	Selector  EndpointSelector `json:"selector"`
	Namespace string           `json:"namespace,omitempty"`
}
