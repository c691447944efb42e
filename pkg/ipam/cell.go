package ipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/paths"
)

// Cell provides the node's *Allocator.
var Cell = cell.Module("ipam", "Pod address allocation from the pod CIDR of this node",
	cell.Config(DefaultConfig),
	cell.Provide(newFromConfig),
	cell.Invoke(registerMetrics, registerOrphanRelease),
)

// Config is the node's pool: a fixed pod CIDR, or (empty) the one the
// operator's cluster-pool IPAM writes into this node's CiliumNode.
type Config struct {
	IPAMPodCIDR string `mapstructure:"ipam-pod-cidr"`
	// IPAMOrphanGracePeriod is how long after a restore an address that
	// no endpoint holds stays allocated, for the CNI ADD that a crash
	// interrupted to finish or be retried.
	IPAMOrphanGracePeriod time.Duration `mapstructure:"ipam-orphan-grace-period"`
}

// DefaultConfig takes the pod CIDR from the cluster, and waits longer
// than cilium-cni's two-minute timeout before freeing orphans.
var DefaultConfig = Config{IPAMOrphanGracePeriod: 5 * time.Minute}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("ipam-pod-cidr", d.IPAMPodCIDR, "this node's IPv4 pod CIDR, e.g. 10.0.1.0/24; empty: the one the operator writes into this node's CiliumNode")
	fs.Duration("ipam-orphan-grace-period", d.IPAMOrphanGracePeriod,
		"after a restart, how long an address that no restored endpoint holds stays allocated before it is freed")
}

// PodCIDR parses and checks the flag; invalid and no error when unset.
func (c Config) PodCIDR() (netip.Prefix, error) {
	if c.IPAMPodCIDR == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(c.IPAMPodCIDR)
	if err == nil {
		err = validCIDR(p)
	}
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("--ipam-pod-cidr %q: %w", c.IPAMPodCIDR, err)
	}
	return p, nil
}

// PodCIDRSource tells the node's pod CIDR once the cluster has assigned
// one; the Kubernetes cell provides it from this node's CiliumNode.
type PodCIDRSource interface {
	WaitPodCIDR(ctx context.Context) (netip.Prefix, error)
}

// StateFile is where the pool persists under the state directory.
func StateFile(p paths.Config) string { return filepath.Join(p.StateDir, "ipam.json") }

type params struct {
	cell.In
	Config    Config
	Paths     paths.Config
	Log       *slog.Logger
	Health    cell.Health
	Lifecycle cell.Lifecycle
	Source    PodCIDRSource `optional:"true"`
}

// newFromConfig opens the pool at start, before the endpoint manager
// restores (it is constructed first, so its hook runs first): with the
// pod CIDR from the flag, or after waiting for the cluster's.
func newFromConfig(p params) (*Allocator, error) {
	cidr, err := p.Config.PodCIDR()
	if err != nil {
		return nil, err
	}
	if err := validGrace(p.Config.IPAMOrphanGracePeriod); err != nil {
		return nil, err
	}
	if !cidr.IsValid() && p.Source == nil {
		return nil, fmt.Errorf("--ipam-pod-cidr: required without Kubernetes (--enable-k8s), which would supply it")
	}
	a := NewPending(podlink.GatewayIPv4, StateFile(p.Paths))
	p.Lifecycle.Append(cell.Hook{OnStart: func(ctx cell.HookContext) error {
		if !cidr.IsValid() {
			p.Health.OK("waiting for this node's pod CIDR in its CiliumNode")
			if cidr, err = p.Source.WaitPodCIDR(ctx); err != nil {
				return fmt.Errorf("pod CIDR: %w", err)
			}
		}
		dropped, err := a.Open(cidr)
		if err != nil {
			return err
		}
		for _, d := range dropped {
			p.Log.Warn("dropping allocation outside the pod CIDR", "ip", d.IP, "owner", d.Owner, "pod-cidr", cidr)
		}
		p.Log.Info("IPAM ready", "pod-cidr", cidr, "allocations", len(a.List()))
		p.Health.OK(fmt.Sprintf("pod CIDR %s", cidr))
		return nil
	}})
	return a, nil
}
