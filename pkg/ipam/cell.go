package ipam

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/pkg/paths"
)

// Cell provides the node's *Allocator.
var Cell = cell.Module("ipam", "Pod address allocation from the pod CIDR of this node",
	cell.Config(DefaultConfig),
	cell.Provide(newFromConfig),
	cell.Invoke(registerMetrics),
)

// Config is the node's pool. The pod CIDR is given here until the
// operator writes it into the node's CiliumNode.
type Config struct {
	IPAMPodCIDR string `mapstructure:"ipam-pod-cidr"`
}

// DefaultConfig has no CIDR: the agent cannot guess one.
var DefaultConfig = Config{}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("ipam-pod-cidr", d.IPAMPodCIDR, "this node's IPv4 pod CIDR, e.g. 10.0.1.0/24")
}

// PodCIDR parses and checks the flag.
func (c Config) PodCIDR() (netip.Prefix, error) {
	if c.IPAMPodCIDR == "" {
		return netip.Prefix{}, fmt.Errorf("--ipam-pod-cidr: required")
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

// StateFile is where the pool persists under the state directory.
func StateFile(p paths.Config) string { return filepath.Join(p.StateDir, "ipam.json") }

func newFromConfig(c Config, p paths.Config, log *slog.Logger, h cell.Health) (*Allocator, error) {
	cidr, err := c.PodCIDR()
	if err != nil {
		return nil, err
	}
	a, dropped, err := New(cidr, datapath.GatewayIPv4, StateFile(p))
	if err != nil {
		return nil, err
	}
	for _, d := range dropped {
		log.Warn("dropping allocation outside the pod CIDR", "ip", d.IP, "owner", d.Owner, "podCIDR", cidr)
	}
	log.Info("IPAM ready", "podCIDR", cidr, "allocations", len(a.List()))
	h.OK(fmt.Sprintf("pod CIDR %s", cidr))
	return a, nil
}
