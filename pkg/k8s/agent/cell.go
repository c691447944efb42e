package agent

import (
	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/pkg/k8s/tables"
)

// Cell connects to Kubernetes and provides *Clients and the tables'
// *tables.Clients (both nil with Kubernetes off). What the agent reads of
// the cluster is in the tables of pkg/k8s/tables.
var Cell = cell.Module("k8s", "Kubernetes clients",
	cell.Config(DefaultConfig),
	cell.Provide(newClients, tableClients),
)

func newClients(cfg Config) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, nil
	}
	return NewClients(cfg)
}

// tableClients are what the tables' reflectors list and watch through.
func tableClients(cfg Config, c *Clients) *tables.Clients {
	if c == nil {
		return nil
	}
	return &tables.Clients{Kube: c.Kube, Cilium: c.Cilium, NodeName: cfg.K8sNodeName}
}
