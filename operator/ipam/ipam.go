// Package ipam is the operator's cluster-pool IPAM: every Node gets a
// CiliumNode of the same name whose spec.ipam.podCIDRs holds one CIDR
// carved from the cluster pool. CiliumNodes are the only record of who has
// what, so a new leader rebuilds the pool from them before handing out
// anything, and failover never gives one CIDR to two nodes.
package ipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/operator/crdinstall"
	"github.com/cilium-go/cilium/operator/ipam/pool"
	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/leader"
)

// Cell runs the cluster-pool allocator on the leader.
var Cell = cell.Module("cluster-pool-ipam", "Pod CIDRs for every node from the cluster pool",
	cell.Config(DefaultConfig),
	cell.Invoke(Config.Validate),
	cell.Provide(newController),
)

// Config is the cluster pool.
type Config struct {
	ClusterPoolIPv4CIDR     []string `mapstructure:"cluster-pool-ipv4-cidr"`
	ClusterPoolIPv4MaskSize int      `mapstructure:"cluster-pool-ipv4-mask-size"`
}

// DefaultConfig is Cilium's default pool.
var DefaultConfig = Config{
	ClusterPoolIPv4CIDR:     []string{"10.0.0.0/8"},
	ClusterPoolIPv4MaskSize: 24,
}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.StringSlice("cluster-pool-ipv4-cidr", d.ClusterPoolIPv4CIDR, "IPv4 CIDRs the nodes' pod CIDRs are carved from")
	fs.Int("cluster-pool-ipv4-mask-size", d.ClusterPoolIPv4MaskSize, "prefix length of each node's pod CIDR")
}

// Validate names the flag whose value is bad.
func (c Config) Validate() error {
	_, err := c.NewPool()
	return err
}

// NewPool parses the flags into an empty pool.
func (c Config) NewPool() (*pool.Pool, error) {
	var cidrs []netip.Prefix
	for _, s := range c.ClusterPoolIPv4CIDR {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--cluster-pool-ipv4-cidr %q: %w", s, err)
		}
		cidrs = append(cidrs, p)
	}
	p, err := pool.New(cidrs, c.ClusterPoolIPv4MaskSize)
	if err != nil {
		return nil, fmt.Errorf("--cluster-pool-ipv4-cidr %v / --cluster-pool-ipv4-mask-size %d: %w",
			c.ClusterPoolIPv4CIDR, c.ClusterPoolIPv4MaskSize, err)
	}
	return p, nil
}

func newController(log *slog.Logger, cfg Config, c k8s.Clients, crds *crdinstall.Installed) leader.Out {
	return leader.Out{Controller: leader.Controller{Name: "cluster-pool-ipam", Run: func(ctx context.Context) error {
		if err := crds.Wait(ctx); err != nil {
			return err
		}
		p, err := cfg.NewPool()
		if err != nil {
			return err
		}
		return NewAllocator(log, c, p).Run(ctx)
	}}}
}
