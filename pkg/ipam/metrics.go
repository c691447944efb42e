package ipam

import "github.com/prometheus/client_golang/prometheus"

// Capacity is how many addresses the pool can hand out.
// A pending pool holds none.
func (a *Allocator) Capacity() int {
	cidr := a.PodCIDR()
	if !cidr.IsValid() {
		return 0
	}
	return 1<<(32-cidr.Bits()) - 2
}

// registerMetrics exports allocated addresses and the pool's capacity.
func registerMetrics(reg *prometheus.Registry, a *Allocator) error {
	used := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cilium_ip_addresses", Help: "Pod addresses allocated on this node",
		ConstLabels: prometheus.Labels{"family": "ipv4"},
	}, func() float64 { return float64(len(a.List())) })
	capacity := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cilium_ipam_capacity", Help: "Pod addresses this node can allocate",
		ConstLabels: prometheus.Labels{"family": "ipv4"},
	}, func() float64 { return float64(a.Capacity()) })
	if err := reg.Register(used); err != nil {
		return err
	}
	return reg.Register(capacity)
}
