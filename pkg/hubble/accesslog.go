package hubble

import (
	"context"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"

	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/metrics"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/paths"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
	proxyagent "github.com/cilium-go/cilium/pkg/proxy/agent"
)

// L7Records takes the layer-7 proxy's records into the node's flows:
// made flows as the datapath's events are, kept in the same ring and
// counted in the same metrics.
type L7Records struct {
	log     *slog.Logger
	parser  *parser.Parser
	ring    *container.Ring
	metrics *metrics.Metrics
}

// newL7Records is nil when Hubble is off.
func newL7Records(log *slog.Logger, pr *parser.Parser, ring *flowRing, m *metrics.Metrics) *L7Records {
	if ring == nil {
		return nil
	}
	return &L7Records{log: log, parser: pr, ring: ring.Ring, metrics: m}
}

// Record makes a flow of r in the node's ring.
func (l *L7Records) Record(r accesslog.Record) {
	f, err := l.parser.DecodeRecord(r)
	if err != nil {
		l.log.Debug("L7 record not shown", "error", err)
		return
	}
	l.ring.Write(container.Event{Flow: f})
	if l.metrics != nil {
		l.metrics.Process(f)
	}
}

// accessLogCell reads the layer-7 proxy's access log into the node's
// flows, with Hubble and the proxy on: the proxy's process sends its
// records to accesslog.sock in the proxy's directory (--proxy-dir), where
// the agent's other sockets for the proxy are. As Cilium's agent reads
// Envoy's access log on a socket of a fixed path, no flag names it.
var accessLogCell = cell.Module("proxy-accesslog", "Layer-7 proxy records as L7 flows",
	cell.Invoke(registerAccessLog),
)

type accessLogParams struct {
	cell.In
	Proxy   proxyagent.Config
	Paths   paths.Config
	Log     *slog.Logger
	Jobs    job.Group
	Records *L7Records
}

// registerAccessLog adds the job that listens on the socket.
func registerAccessLog(p accessLogParams) {
	if p.Records == nil || !p.Proxy.EnableL7Proxy {
		return
	}
	path := accesslog.SocketFile(p.Proxy.Dir(p.Paths))
	p.Jobs.Add(job.OneShot("hubble-proxy-accesslog", func(ctx context.Context, _ cell.Health) error {
		l, err := accesslog.Listen(path, p.Log)
		if err != nil {
			return err
		}
		p.Log.Info("reading the layer-7 proxy's records", "socket", path)
		return l.Serve(ctx, p.Records.Record)
	}))
}
