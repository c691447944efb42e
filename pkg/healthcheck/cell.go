package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/healthcheck/probe"
	"github.com/cilium-go/cilium/pkg/ipam"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/node"
	"github.com/cilium-go/cilium/pkg/paths"
	"github.com/cilium-go/cilium/pkg/unixsock"
)

// Cell runs health checking when --enable-health-checking is on and a
// datapath provides the sockets: the node's responder, the prober, the
// health API on health.sock next to the agent's socket and, with
// --enable-endpoint-health-checking and Kubernetes, the health endpoint.
var Cell = cell.Module("health-check", "Reachability of every node and health endpoint for cilium-health",
	cell.Config(DefaultConfig),
	health.JobGroup,
	cell.Invoke(register),
)

// Config holds Cilium's flags of these names.
type Config struct {
	EnableHealthChecking         bool `mapstructure:"enable-health-checking"`
	EnableEndpointHealthChecking bool `mapstructure:"enable-endpoint-health-checking"`
}

// DefaultConfig is Cilium's: both on.
var DefaultConfig = Config{EnableHealthChecking: true, EnableEndpointHealthChecking: true}

// Flags implements cell.Flagger.
func (c Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("enable-health-checking", c.EnableHealthChecking,
		"probe every node over ICMP and HTTP (port 4240) and serve the results on health.sock, for cilium-health")
	fs.Bool("enable-endpoint-health-checking", c.EnableEndpointHealthChecking,
		"run a health endpoint (reserved identity health) on this node and probe the other nodes' health endpoints")
}

// SocketPath is the health API's socket: health.sock beside the agent's
// socket, /var/run/cilium/health.sock by default as Cilium's.
func SocketPath(p paths.Config) string {
	return filepath.Join(filepath.Dir(p.SocketPath), "health.sock")
}

type params struct {
	cell.In
	Config    Config
	K8s       k8sagent.Config
	Log       *slog.Logger
	Lifecycle cell.Lifecycle
	Jobs      job.Group
	Paths     paths.Config
	Modules   *health.Registry
	Datapath  Datapath `optional:"true"`
	Endpoints *endpoint.Manager
	IPAM      *ipam.Allocator
	Cluster   *node.Cluster     `optional:"true"`
	Clients   *k8sagent.Clients `optional:"true"`
}

func register(p params) error {
	if p.Datapath == nil {
		p.Log.Info("health checking off: no datapath to probe from")
		return nil
	}
	name := p.K8s.K8sNodeName
	if name == "" {
		var err error
		if name, err = os.Hostname(); err != nil {
			return fmt.Errorf("node name for health checking: %w", err)
		}
	}
	he := &healthEndpoint{dp: p.Datapath, eps: p.Endpoints, ipam: p.IPAM}
	endpoints := p.Config.EnableHealthChecking && p.Config.EnableEndpointHealthChecking
	if endpoints && p.Cluster == nil {
		// Without the cluster the ipcache does not know this node's own
		// address, so the node's probes would reach its health endpoint
		// as the world, which the endpoint's rule refuses.
		p.Log.Info("endpoint health checking off: it needs Kubernetes (--enable-k8s)")
		endpoints = false
	}
	if !p.Config.EnableHealthChecking {
		p.Jobs.Add(job.OneShot("health-endpoint", func(ctx context.Context, _ cell.Health) error {
			return removeEndpoint(ctx, he, p.Clients, name)
		}, job.WithRetry(5, &job.ExponentialBackoff{Min: time.Second, Max: time.Minute})))
		return nil
	}
	var localHealthIP atomic.Pointer[netip.Addr]
	nodes := func() []node.Node {
		self := node.Node{Name: name, Self: true, IPv4: p.Datapath.NodeIPv4(), PodCIDR: p.IPAM.PodCIDR()}
		if ip := localHealthIP.Load(); ip != nil {
			self.HealthIPv4 = *ip
		}
		var others []node.Node
		if p.Cluster != nil {
			others = p.Cluster.List(p.Cluster.DB.ReadTxn())
		}
		return withSelf(others, self)
	}
	checker := NewChecker(probe.New(p.Datapath, probe.DefaultTimeout), name, DefaultInterval, endpoints, nodes)
	api := &http.Server{Handler: NewAPI(checker, p.Modules, p.Log).Handler(), ReadHeaderTimeout: 10 * time.Second}
	responder := probe.NewResponder()
	var serving sync.WaitGroup
	serve := func(what string, fn func() error) {
		serving.Go(func() {
			if err := fn(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.Log.Warn("health checking stopped serving", "what", what, "error", err)
			}
		})
	}
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			sock, err := unixsock.Listen(SocketPath(p.Paths))
			if err != nil {
				return fmt.Errorf("health API: %w", err)
			}
			addr := netip.AddrPortFrom(p.Datapath.NodeIPv4(), probe.Port).String()
			l, err := p.Datapath.ListenNode(addr)
			if err != nil {
				sock.Close()
				return fmt.Errorf("health responder on %s: %w", addr, err)
			}
			serve("health API", func() error { return api.Serve(sock) })
			serve("node responder", func() error { return responder.Serve(l) })
			return nil
		},
		OnStop: func(hc cell.HookContext) error {
			err := errors.Join(api.Shutdown(hc), responder.Shutdown(hc))
			serving.Wait()
			if endpoints {
				// Its responder was this process: the endpoint goes with
				// it (endpoint, address, namespace), and the next agent
				// makes it afresh. The job that made it has stopped; the
				// endpoint manager runs until after this hook.
				err = errors.Join(err, he.remove(hc))
			}
			return err
		},
	})

	p.Jobs.Add(job.OneShot("health-endpoint", func(ctx context.Context, h cell.Health) error {
		if !endpoints {
			return removeEndpoint(ctx, he, p.Clients, name)
		}
		ep, err := he.create(ctx)
		if err != nil {
			return err
		}
		l, err := p.Datapath.ListenHealth(netip.AddrPortFrom(ep.IPv4, probe.Port).String())
		if err != nil {
			return fmt.Errorf("health endpoint responder: %w", err)
		}
		serve("health endpoint responder", func() error { return responder.Serve(l) })
		localHealthIP.Store(&ep.IPv4)
		p.Log.Info("health endpoint ready", "id", ep.ID, "ipv4", ep.IPv4)
		// Retried here: a retry of the job would make the endpoint again.
		for wait := time.Second; ; wait = min(2*wait, time.Minute) {
			err := publishIf(ctx, p.Clients, name, ep.IPv4)
			if err == nil {
				break
			}
			h.Degraded("health endpoint address not published", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		h.OK(fmt.Sprintf("health endpoint %d at %s", ep.ID, ep.IPv4))
		return nil
	}, job.WithRetry(-1, &job.ExponentialBackoff{Min: time.Second, Max: time.Minute})))
	p.Jobs.Add(job.OneShot("health-probe", func(ctx context.Context, _ cell.Health) error {
		checker.Run(ctx)
		return nil
	}))
	return nil
}

func publishIf(ctx context.Context, c *k8sagent.Clients, node string, ip netip.Addr) error {
	if c == nil {
		return nil
	}
	return publish(ctx, c, node, ip)
}

// removeEndpoint removes the health endpoint an earlier agent made, and
// its address from the CiliumNode, when this one runs none.
func removeEndpoint(ctx context.Context, he *healthEndpoint, c *k8sagent.Clients, node string) error {
	return errors.Join(he.remove(ctx), publishIf(ctx, c, node, netip.Addr{}))
}
