package loadbalancer

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/health"
)

// Config holds Cilium's flags for the kube-proxy replacement.
type Config struct {
	// KubeProxyReplacement balances Services in the datapath; off,
	// kube-proxy does it beside the agent.
	KubeProxyReplacement bool `mapstructure:"kube-proxy-replacement"`
	// BPFLBSock translates at the socket (connect, sendmsg), once per
	// connection, for the processes of the node's cgroup.
	BPFLBSock bool `mapstructure:"bpf-lb-sock"`
	// BPFLBMode is how NodePort traffic reaches remote backends: snat.
	BPFLBMode string `mapstructure:"bpf-lb-mode"`
	// NodePortRange is the range NodePorts are allocated from.
	NodePortRange string `mapstructure:"node-port-range"`
	// BPFLBMapMax is the size of the service, backend and reverse NAT
	// maps; a Service that does not fit beside the others is refused.
	BPFLBMapMax int `mapstructure:"bpf-lb-map-max"`
	// BPFLBSourceRangeAllTypes: loadBalancerSourceRanges fence a
	// Service's NodePorts and ExternalIPs too, not only its
	// LoadBalancer addresses, so that they are no way around them.
	BPFLBSourceRangeAllTypes bool `mapstructure:"bpf-lb-source-range-all-types"`
	// BPFLBAlgorithm picks the backend of a connection from outside:
	// random, or maglev (the same backend for a flow on every node).
	// With BPFLBAlgorithmAnnotation, a Service's
	// service.cilium.io/lb-algorithm annotation picks its own.
	BPFLBAlgorithm           string `mapstructure:"bpf-lb-algorithm"`
	BPFLBAlgorithmAnnotation bool   `mapstructure:"bpf-lb-algorithm-annotation"`
	// BPFLBMaglevTableSize is the slots of a frontend's Maglev table (a
	// prime, MaglevTableSizes), and BPFLBMaglevHashSeed the cluster's
	// seed of its tables and of the flow hash (12 bytes in base64): the
	// same on every node, or they pick differently.
	BPFLBMaglevTableSize int    `mapstructure:"bpf-lb-maglev-table-size"`
	BPFLBMaglevHashSeed  string `mapstructure:"bpf-lb-maglev-hash-seed"`
}

// The values of --bpf-lb-algorithm and of the lb-algorithm annotation.
const (
	AlgorithmRandom = "random"
	AlgorithmMaglev = "maglev"
)

// MaglevSeeds are the seeds of a cluster's Maglev tables and of the
// datapath's flow hash, from --bpf-lb-maglev-hash-seed.
type MaglevSeeds struct {
	Table uint64
	Flow  uint32
}

// MaglevSeeds decodes --bpf-lb-maglev-hash-seed: its first 8 bytes seed
// the tables, the last 4 the flow hash.
func (c Config) MaglevSeeds() (MaglevSeeds, error) {
	b, err := base64.StdEncoding.DecodeString(c.BPFLBMaglevHashSeed)
	if err != nil || len(b) != 12 {
		return MaglevSeeds{}, fmt.Errorf("--bpf-lb-maglev-hash-seed %q: want 12 bytes in base64 (16 characters), as `head -c12 /dev/urandom | base64`",
			c.BPFLBMaglevHashSeed)
	}
	return MaglevSeeds{Table: binary.BigEndian.Uint64(b[:8]), Flow: binary.BigEndian.Uint32(b[8:])}, nil
}

// DefaultConfig follows Cilium's defaults, with kube-proxy beside.
var DefaultConfig = Config{
	BPFLBSock:            true,
	BPFLBMode:            "snat",
	NodePortRange:        "30000-32767",
	BPFLBMapMax:          65536,
	BPFLBAlgorithm:       AlgorithmRandom,
	BPFLBMaglevTableSize: 16381,
	// Cilium's default seed: a cluster that keeps it hashes as one that
	// runs Cilium's default does not (the hashes differ), but alike on
	// all of its nodes.
	BPFLBMaglevHashSeed: "JLfvgnHc2kaSUFaI",
}

// Flags implements cell.Flagger.
func (c Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("kube-proxy-replacement", c.KubeProxyReplacement,
		"balance Services (ClusterIP, NodePort, ExternalIPs) and pods' hostPorts in the datapath and answer healthCheckNodePorts; off: kube-proxy runs beside, and hostPorts are not mapped")
	fs.Bool("bpf-lb-sock", c.BPFLBSock,
		"with the kube-proxy replacement, translate Service addresses at the socket (connect, sendmsg) for the processes of --cgroup-root")
	fs.String("bpf-lb-mode", c.BPFLBMode, "how NodePort traffic reaches a backend on another node: snat")
	fs.String("node-port-range", c.NodePortRange, "the NodePort range, as the API server's --service-node-port-range: min-max")
	fs.Int("bpf-lb-map-max", c.BPFLBMapMax, "entries of the service, backend and source range maps")
	fs.Bool("bpf-lb-source-range-all-types", c.BPFLBSourceRangeAllTypes,
		"loadBalancerSourceRanges fence a Service's NodePorts and ExternalIPs too, not only its LoadBalancer addresses")
	fs.String("bpf-lb-algorithm", c.BPFLBAlgorithm,
		"how a connection from outside picks its backend: random, or maglev (consistent hashing: every node picks the same backend for a flow)")
	fs.Bool("bpf-lb-algorithm-annotation", c.BPFLBAlgorithmAnnotation,
		"a Service's service.cilium.io/lb-algorithm annotation (random or maglev) overrides --bpf-lb-algorithm")
	fs.Int("bpf-lb-maglev-table-size", c.BPFLBMaglevTableSize,
		fmt.Sprintf("the slots of each frontend's Maglev table, one of %v; about 100 times the most backends a Service has", MaglevTableSizes))
	fs.String("bpf-lb-maglev-hash-seed", c.BPFLBMaglevHashSeed,
		"the cluster's Maglev seed, 12 bytes in base64; every node must have the same")
}

// PortRange is a range of ports, both ends included.
type PortRange struct{ Min, Max uint16 }

// Validate names the first bad flag.
func (c Config) Validate() error {
	if c.BPFLBMode != "snat" {
		return fmt.Errorf("--bpf-lb-mode %q: only snat is supported", c.BPFLBMode)
	}
	if _, err := c.NodePorts(); err != nil {
		return err
	}
	if c.BPFLBMapMax < 1024 || c.BPFLBMapMax > 1<<24 {
		return fmt.Errorf("--bpf-lb-map-max %d: want 1024 to %d", c.BPFLBMapMax, 1<<24)
	}
	if c.BPFLBAlgorithm != AlgorithmRandom && c.BPFLBAlgorithm != AlgorithmMaglev {
		return fmt.Errorf("--bpf-lb-algorithm %q: want random or maglev", c.BPFLBAlgorithm)
	}
	if err := ValidMaglevTableSize(c.BPFLBMaglevTableSize); err != nil {
		return err
	}
	_, err := c.MaglevSeeds()
	return err
}

// NodePorts parses --node-port-range ("30000-32767"; Cilium's
// "30000,32767" is accepted too).
func (c Config) NodePorts() (PortRange, error) {
	lo, hi, ok := strings.Cut(c.NodePortRange, "-")
	if !ok {
		lo, hi, ok = strings.Cut(c.NodePortRange, ",")
	}
	l, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	h, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 16)
	if !ok || err1 != nil || err2 != nil || l == 0 || l > h {
		return PortRange{}, fmt.Errorf("--node-port-range %q: want min-max, 1 <= min <= max <= 65535", c.NodePortRange)
	}
	return PortRange{Min: uint16(l), Max: uint16(h)}, nil
}

// NodeAddresses are the node's addresses that NodePorts listen on; the
// datapath provides them.
type NodeAddresses []netip.Addr

// Cell provides the tables (statedb.Table for readers) and, with
// --kube-proxy-replacement, fills them from the Intake (Services and this
// node's pods' hostPorts; pkg/loadbalancer/k8s provides it) and serves
// the healthCheckNodePorts; their reconcilers write the service maps.
// Without it the tables stay empty, and the maps too.
var Cell = cell.Module("loadbalancer", "Services balanced in the datapath - the kube-proxy replacement",
	cell.Config(DefaultConfig),
	cell.Provide(NewTables, Tables.readers, newLister),
	health.JobGroup,
	cell.Invoke(register),
)

// Readers are the tables for those who only read them.
type Readers struct {
	cell.Out
	Services  statedb.Table[*ServiceRow]
	Frontends statedb.Table[*FrontendRow]
	Backends  statedb.Table[*BackendRow]
}

func (t Tables) readers() Readers {
	return Readers{Services: t.Services, Frontends: t.Frontends, Backends: t.Backends}
}

type params struct {
	cell.In
	Config    Config
	Lifecycle cell.Lifecycle
	Jobs      job.Group
	Log       *slog.Logger
	Tables    Tables
	Map       MapSource
	Addresses NodeAddresses
	Intake    *Intake `optional:"true"`
	Sockets   Sockets `optional:"true"`
	Events    Events  `optional:"true"`
	// Listen opens the healthCheckNodePorts; tests give their own.
	Listen     ListenFunc `optional:"true"`
	Reconciler reconciler.Params
}

func register(p params) error {
	if err := p.Config.Validate(); err != nil {
		return err
	}
	intake := p.Intake
	if !p.Config.KubeProxyReplacement {
		intake = nil
	}
	local := Local{Addresses: p.Addresses, SourceRangeAllTypes: p.Config.BPFLBSourceRangeAllTypes,
		Algorithm: p.Config.BPFLBAlgorithm, AlgorithmAnnotation: p.Config.BPFLBAlgorithmAnnotation}
	if intake != nil {
		local.NodeName = intake.NodeName
	}
	db := p.Reconciler.DB
	c, err := newController(db, p.Tables, local, intake, p.Log, limitsOf(p.Config.BPFLBMapMax))
	if err != nil {
		return err
	}
	c.events, c.maps = p.Events, p.Map
	sockets := p.Sockets
	if !p.Config.BPFLBSock {
		sockets = nil
	}
	seeds, _ := p.Config.MaglevSeeds() // valid: Validate checked it
	fr, br, err := registerReconcilers(p.Reconciler, p.Tables, p.Map, sockets, seeds.Table,
		func() { c.frontendsPruned.Store(true); c.wake.Fire() }, func() { c.backendsPruned.Store(true); c.wake.Fire() })
	if err != nil {
		return err
	}
	c.frontendsDone, c.backendsDone = newProgress(untilReconciled[*FrontendRow](fr)),
		newProgress(untilReconciled[*BackendRow](br))
	desired.Controller(p.Jobs, "loadbalancer", db, c.inputs(), c.run)
	// The datapath that gives the maps opens them in a start hook,
	// appended when it was made for this function's parameters, so
	// before this one: a first run that found them closed runs again
	// now, not after its backoff.
	p.Lifecycle.Append(cell.Hook{OnStart: func(cell.HookContext) error {
		c.wake.Fire()
		return nil
	}})
	for name, f := range map[string]*progress{"loadbalancer-frontends-written": c.frontendsDone,
		"loadbalancer-backends-written": c.backendsDone} {
		p.Jobs.Add(job.OneShot(name, func(ctx context.Context, _ cell.Health) error {
			f.run(ctx, c.wake.Fire)
			return nil
		}))
	}
	if intake != nil {
		// Replacing kube-proxy, the agent answers the load balancers'
		// health checks too.
		hc := newHealthChecks(db, p.Tables.Services, p.Addresses, p.Log)
		if p.Listen != nil {
			hc.listen = p.Listen
		}
		p.Jobs.Add(job.OneShot("healthcheck-node-ports", hc.run))
	}
	return nil
}
