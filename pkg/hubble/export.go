package hubble

import (
	"context"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"

	"github.com/cilium-go/cilium/pkg/hubble/exporter"
)

// exporterCell writes the node's flows to a file when asked.
var exporterCell = cell.Module("exporter", "The node flows written to a file",
	cell.Invoke(registerExporter),
)

func registerExporter(c exporter.Config, ring *flowRing, node nodeName, jobs job.Group, log *slog.Logger) error {
	if ring == nil || !c.Enabled() {
		return nil
	}
	exp, err := exporter.New(c, string(node), log)
	if err != nil {
		return err
	}
	jobs.Add(job.OneShot("hubble-exporter", func(ctx context.Context, _ cell.Health) error { return exp.Run(ctx, ring.Ring) }))
	return nil
}
