// Package leader runs the operator's controllers on one replica at a time:
// replicas compete for a coordination.k8s.io Lease, the holder runs every
// Controller, and the others stand by until the lease is released or lapses.
// Controllers rebuild their state from the API server each time they start,
// so a new leader continues where the old one stopped.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cilium-go/cilium/operator/k8s"
)

// Cell provides *Elector, which runs the "leader-controllers" value group.
var Cell = cell.Module("leader-election", "Lease-based leader election for the controllers",
	cell.Config(DefaultConfig),
	cell.Provide(newElector),
	cell.Invoke(func(*Elector) {}), // campaign even if nothing asks who leads
)

// Controller is work only the leader does. Run blocks until ctx is
// cancelled (leadership lost or shutdown); an error restarts it after a
// pause, as long as this replica leads.
type Controller struct {
	Name string
	Run  func(ctx context.Context) error
}

// Out lets a cell contribute a Controller: return it from a constructor.
type Out struct {
	cell.Out
	Controller Controller `group:"leader-controllers"`
}

// Config is the lease and its timing.
type Config struct {
	Namespace     string        `mapstructure:"leader-election-namespace"`
	LeaseName     string        `mapstructure:"leader-election-lease-name"`
	Identity      string        `mapstructure:"leader-election-identity"`
	LeaseDuration time.Duration `mapstructure:"leader-election-lease-duration"`
	RenewDeadline time.Duration `mapstructure:"leader-election-renew-deadline"`
	RetryPeriod   time.Duration `mapstructure:"leader-election-retry-period"`
}

// DefaultConfig follows the usual controller-manager timing.
var DefaultConfig = Config{
	Namespace:     "kube-system",
	LeaseName:     "cilium-operator-resource-lock",
	LeaseDuration: 15 * time.Second,
	RenewDeadline: 10 * time.Second,
	RetryPeriod:   2 * time.Second,
}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("leader-election-namespace", d.Namespace, "namespace of the leader election Lease")
	fs.String("leader-election-lease-name", d.LeaseName, "name of the leader election Lease")
	fs.String("leader-election-identity", d.Identity, "this replica's name in the Lease (empty: hostname and pid)")
	fs.Duration("leader-election-lease-duration", d.LeaseDuration, "how long standby replicas wait after the last renewal before taking over")
	fs.Duration("leader-election-renew-deadline", d.RenewDeadline, "how long the leader keeps retrying a renewal before giving up leadership")
	fs.Duration("leader-election-retry-period", d.RetryPeriod, "pause between attempts to acquire or renew the Lease")
}

// Validate names the first bad flag; client-go needs
// duration > deadline > 1.2 * retry.
func (c Config) Validate() error {
	switch {
	case c.Namespace == "":
		return errors.New("--leader-election-namespace: empty")
	case c.LeaseName == "":
		return errors.New("--leader-election-lease-name: empty")
	case c.RetryPeriod <= 0:
		return fmt.Errorf("--leader-election-retry-period %s: not positive", c.RetryPeriod)
	case c.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(c.RetryPeriod)):
		return fmt.Errorf("--leader-election-renew-deadline %s: must exceed 1.2 * --leader-election-retry-period", c.RenewDeadline)
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("--leader-election-lease-duration %s: must exceed --leader-election-renew-deadline", c.LeaseDuration)
	}
	return nil
}

// Elector campaigns for the Lease from start to stop.
type Elector struct {
	log         *slog.Logger
	cfg         Config
	lock        resourcelock.Interface
	controllers []Controller
	leading     atomic.Bool
	cancel      context.CancelFunc
	done        chan struct{}
}

type params struct {
	cell.In
	Log         *slog.Logger
	Lifecycle   cell.Lifecycle
	Config      Config
	Clients     k8s.Clients
	Controllers []Controller `group:"leader-controllers"`
}

func newElector(p params) (*Elector, error) {
	e, err := New(p.Log, p.Config, p.Clients, p.Controllers)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error { e.Start(); return nil },
		OnStop:  func(ctx cell.HookContext) error { return e.Stop(ctx) },
	})
	return e, nil
}

// New builds an elector over the Lease in cfg; it campaigns once started.
func New(log *slog.Logger, cfg Config, c k8s.Clients, controllers []Controller) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("leader election identity: %w", err)
		}
		cfg.Identity = host + "-" + strconv.Itoa(os.Getpid())
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.LeaseName,
		c.Kube.CoreV1(), c.Kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: cfg.Identity})
	if err != nil {
		return nil, fmt.Errorf("lease lock: %w", err)
	}
	return &Elector{log: log, cfg: cfg, lock: lock, controllers: controllers}, nil
}

// Identity is this replica's name in the Lease.
func (e *Elector) Identity() string { return e.cfg.Identity }

// IsLeader says whether this replica holds the Lease and runs the controllers.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Start campaigns in the background until Stop.
func (e *Elector) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan struct{})
	go func() {
		defer close(e.done)
		// A replica that loses the lease (API server unreachable past the
		// renew deadline) stands by again rather than exiting.
		for ctx.Err() == nil {
			e.campaign(ctx)
		}
	}()
}

// Stop stops the controllers and releases the Lease, so a standby replica
// takes over at once instead of after the lease duration.
func (e *Elector) Stop(ctx context.Context) error {
	if e.cancel == nil {
		return nil
	}
	e.cancel()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("leader election stop: %w", ctx.Err())
	}
}

func (e *Elector) campaign(ctx context.Context) {
	// client-go calls OnStartedLeading in a goroutine of its own and does
	// not wait for it; stopped and running make sure every controller has
	// returned before the Lease is released or campaigned for again, so two
	// replicas never run controllers at once.
	var (
		mu      sync.Mutex
		stopped bool
		running sync.WaitGroup
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          e.lock,
		LeaseDuration: e.cfg.LeaseDuration,
		RenewDeadline: e.cfg.RenewDeadline,
		RetryPeriod:   e.cfg.RetryPeriod,
		Name:          e.cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				defer mu.Unlock()
				if stopped {
					return
				}
				e.leading.Store(true)
				e.log.Info("Leading: starting controllers", "identity", e.cfg.Identity, "controllers", len(e.controllers))
				for _, c := range e.controllers {
					running.Add(1)
					go func() {
						defer running.Done()
						e.runController(lctx, c)
					}()
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != e.cfg.Identity {
					e.log.Info("Standing by", "leader", id)
				}
			},
		},
	})
	if err != nil {
		// The config was validated in New; this is a programming error.
		e.log.Error("Leader elector", "error", err)
		<-ctx.Done()
		return
	}
	le.Run(ctx)
	mu.Lock()
	stopped = true
	mu.Unlock()
	running.Wait()
	if e.leading.Swap(false) {
		e.log.Info("Stopped leading", "identity", e.cfg.Identity)
		if ctx.Err() != nil {
			e.release()
		}
	}
}

// release hands the Lease over on shutdown, so a standby replica takes
// over at once instead of after the lease duration. It is done here, not
// by client-go's ReleaseOnCancel, because that releases before the
// controllers have returned.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	rec, _, err := e.lock.Get(ctx)
	if err != nil || rec.HolderIdentity != e.cfg.Identity {
		return
	}
	now := metav1.NewTime(time.Now())
	err = e.lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	})
	if err != nil {
		e.log.Warn("Lease not released; standby replicas wait for it to lapse", "error", err)
	}
}

func (e *Elector) runController(ctx context.Context, c Controller) {
	pause := time.Second
	for {
		err := c.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		e.log.Error("Controller stopped; restarting", "controller", c.Name, "error", err, "after", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}
