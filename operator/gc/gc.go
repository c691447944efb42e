// Package gc removes what agents leave behind: CiliumIdentities no
// CiliumEndpoint uses any more, after a grace period, and CiliumEndpoints
// whose pod is gone (the agent that should have deleted them may be down).
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/operator/crdinstall"
	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/leader"
)

// Cell runs both collectors on the leader.
var Cell = cell.Module("gc", "Garbage collection of identities and endpoints",
	cell.Config(DefaultConfig),
	cell.Invoke(Config.Validate),
	cell.Provide(newController),
)

// Config is how often the collectors run and how long an identity may be
// unused before it goes.
type Config struct {
	IdentityGCInterval    time.Duration `mapstructure:"identity-gc-interval"`
	IdentityGCGracePeriod time.Duration `mapstructure:"identity-gc-grace-period"`
	EndpointGCInterval    time.Duration `mapstructure:"endpoint-gc-interval"`
}

// DefaultConfig is Cilium's timing.
var DefaultConfig = Config{
	IdentityGCInterval:    15 * time.Minute,
	IdentityGCGracePeriod: 30 * time.Minute,
	EndpointGCInterval:    5 * time.Minute,
}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.Duration("identity-gc-interval", d.IdentityGCInterval, "how often unused CiliumIdentities are looked for")
	fs.Duration("identity-gc-grace-period", d.IdentityGCGracePeriod, "how long a CiliumIdentity stays unused before it is deleted")
	fs.Duration("endpoint-gc-interval", d.EndpointGCInterval, "how often CiliumEndpoints of deleted pods are looked for")
}

// Validate names the first bad flag.
func (c Config) Validate() error {
	for _, f := range []struct {
		flag string
		v    time.Duration
	}{
		{"identity-gc-interval", c.IdentityGCInterval},
		{"identity-gc-grace-period", c.IdentityGCGracePeriod},
		{"endpoint-gc-interval", c.EndpointGCInterval},
	} {
		if f.v <= 0 {
			return fmt.Errorf("--%s %s: not positive", f.flag, f.v)
		}
	}
	return nil
}

func newController(log *slog.Logger, cfg Config, c k8s.Clients, crds *crdinstall.Installed) leader.Out {
	return leader.Out{Controller: leader.Controller{Name: "gc", Run: func(ctx context.Context) error {
		if err := crds.Wait(ctx); err != nil {
			return err
		}
		col := &Collector{Log: log, Clients: c, Grace: cfg.IdentityGCGracePeriod, Now: time.Now}
		return col.Run(ctx, cfg.IdentityGCInterval, cfg.EndpointGCInterval)
	}}}
}

// Collector makes one pass of either kind at a time.
type Collector struct {
	Log     *slog.Logger
	Clients k8s.Clients
	Grace   time.Duration
	Now     func() time.Time
}

// Run collects endpoints and identities at their intervals, both at once
// on start, endpoints first so their identities count as unused in the
// same pass.
func (c *Collector) Run(ctx context.Context, identityEvery, endpointEvery time.Duration) error {
	ids := time.NewTicker(identityEvery)
	defer ids.Stop()
	eps := time.NewTicker(endpointEvery)
	defer eps.Stop()
	c.logErr(c.CollectEndpoints(ctx))
	c.logErr(c.CollectIdentities(ctx))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-eps.C:
			c.logErr(c.CollectEndpoints(ctx))
		case <-ids.C:
			c.logErr(c.CollectIdentities(ctx))
		}
	}
}

// logErr keeps a failed pass from stopping the next: the API server may be
// back by then.
func (c *Collector) logErr(err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		c.Log.Warn("Garbage collection pass incomplete", "error", err)
	}
}
