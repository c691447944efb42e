// Command cilium-operator does the cluster-wide work no single agent owns:
// it installs the CRDs, hands out pod CIDRs to nodes and collects unused
// identities and stale endpoints. Replicas elect a leader that does the
// work; cells.go lists what it is made of.
package main

import (
	"log/slog"
	"os"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/spf13/cobra"

	"k8s.io/klog/v2"

	install "github.com/cilium-go/cilium/install/kubernetes"
)

func main() {
	if err := newCommand(Infrastructure, Controllers).Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand(cells ...cell.Cell) *cobra.Command {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	klog.SetSlogLogger(log) // client-go's leader election and informers log through klog

	return install.HiveCommand("cilium-operator",
		"Run the cilium-go operator: CRDs, cluster-pool IPAM and garbage collection", hive.New(cells...), log)
}
