package loadbalancer

// Events tells the authors of Services what the load balancer refused
// them. The Kubernetes side records each warning as an Event on the
// Service, or on the pod of a HostPort service, where `kubectl describe`
// shows it.
type Events interface {
	// Warn records a warning about the service n. It must not block.
	Warn(n ServiceName, reason, message string)
}

// The reasons of the load balancer's warnings.
const (
	// ReasonServiceRefused: the service needs more room in the service
	// maps, or more numbers, than are left; nothing of it is written,
	// and it is tried again when room frees.
	ReasonServiceRefused = "ServiceRefused"
	// ReasonFrontendConflict: another Service owns a frontend that the
	// service claims (see Owner).
	ReasonFrontendConflict = "FrontendConflict"
	// ReasonBadAlgorithm: the service's lb-algorithm annotation names no
	// algorithm; the agent's serves it.
	ReasonBadAlgorithm = "BadLBAlgorithm"
)
