package endpoint

import "github.com/prometheus/client_golang/prometheus"

// registerMetrics exports the number of endpoints, as Cilium's
// cilium_endpoint gauge does.
func registerMetrics(reg *prometheus.Registry, m *Manager) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cilium_endpoint", Help: "Number of endpoints managed by this agent",
	}, func() float64 { return float64(len(m.List())) }))
}
