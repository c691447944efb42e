package l2announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/health"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// Config holds Cilium's flags of L2 announcements.
type Config struct {
	EnableL2Announcements bool          `mapstructure:"enable-l2-announcements"`
	LeaseDuration         time.Duration `mapstructure:"l2-announcements-lease-duration"`
	RenewDeadline         time.Duration `mapstructure:"l2-announcements-renew-deadline"`
	RetryPeriod           time.Duration `mapstructure:"l2-announcements-retry-period"`
	// K8sNamespace is the agent's namespace, where the Leases are.
	K8sNamespace string `mapstructure:"k8s-namespace"`
	// Election is how announcers are elected: "service", a Lease per
	// Service (Cilium's), or "node", a Lease per node (nodelease.go).
	Election string `mapstructure:"l2-announcements-election"`
}

// The values of --l2-announcements-election.
const (
	ElectionService = "service"
	ElectionNode    = "node"
)

// DefaultConfig follows Cilium's defaults.
var DefaultConfig = Config{
	LeaseDuration: 15 * time.Second,
	RenewDeadline: 5 * time.Second,
	RetryPeriod:   2 * time.Second,
	K8sNamespace:  "kube-system",
	Election:      ElectionService,
}

// Flags implements cell.Flagger.
func (c Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("enable-l2-announcements", c.EnableL2Announcements,
		"answer ARP for the LoadBalancer and external addresses of the Services that CiliumL2AnnouncementPolicies select, one node per Service (needs --kube-proxy-replacement)")
	fs.Duration("l2-announcements-lease-duration", c.LeaseDuration,
		"how long a Service's announcement Lease holds without renewal: the longest a dead node keeps it")
	fs.Duration("l2-announcements-renew-deadline", c.RenewDeadline, "how long the announcer tries to renew its Lease before it gives it up")
	fs.Duration("l2-announcements-retry-period", c.RetryPeriod, "how often the announcer renews, and the others try to take over")
	fs.String("k8s-namespace", c.K8sNamespace, "the agent's namespace, which holds the announcement Leases")
	fs.String("l2-announcements-election", c.Election,
		"how a Service's announcer is elected: service (a Lease per Service, as Cilium; its holder renews it every retry period) or node (a Lease per node, renewed every retry period whatever the number of Services; each Service goes to one of the live nodes that may announce it, the same on every node)")
}

// Validate names the first bad flag. client-go's elections need the
// lease to outlast the renew deadline, and the deadline to outlast a
// jittered retry.
func (c Config) Validate() error {
	switch {
	case !c.EnableL2Announcements:
		return nil
	case c.RetryPeriod <= 0:
		return fmt.Errorf("--l2-announcements-retry-period %s: must be positive", c.RetryPeriod)
	case c.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(c.RetryPeriod)):
		return fmt.Errorf("--l2-announcements-renew-deadline %s: must exceed --l2-announcements-retry-period %s by the factor %.1f",
			c.RenewDeadline, c.RetryPeriod, leaderelection.JitterFactor)
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("--l2-announcements-lease-duration %s: must exceed --l2-announcements-renew-deadline %s",
			c.LeaseDuration, c.RenewDeadline)
	case c.K8sNamespace == "":
		return errors.New("--k8s-namespace: empty")
	case c.Election != ElectionService && c.Election != ElectionNode:
		return fmt.Errorf("--l2-announcements-election %q: want service or node", c.Election)
	}
	return nil
}

// Datapath is the node's side of the announcements; nodedatapath provides
// it.
type Datapath interface {
	// Devices are the devices the datapath serves.
	Devices() ([]spec.Device, error)
	// Map is the responder map, nil until the datapath has opened it.
	Map() Map
	GratuitousARP(spec.L2Responder) error
}

// Map is the datapath's responder map.
type Map interface {
	UpsertL2Responder(spec.L2Responder) error
	DeleteL2Responder(addr netip.Addr, ifindex uint32) error
	L2Responders() ([]spec.L2ResponderEntry, error)
	// BeatL2 keeps the entries answering for maxAge from now.
	BeatL2(maxAge time.Duration) error
}

// Cell announces, with --enable-l2-announcements, the addresses of the
// Services this node wins the Leases of.
var Cell = cell.Module("l2-announcer", "L2 announcements - one node per Service answers ARP for its addresses",
	cell.Config(DefaultConfig),
	cell.Provide(NewTable, func(t statedb.RWTable[*Announcement]) statedb.Table[*Announcement] { return t }),
	health.JobGroup,
	cell.Invoke(register),
)

type params struct {
	cell.In
	Config     Config
	LB         loadbalancer.Config
	Log        *slog.Logger
	Lifecycle  cell.Lifecycle
	Jobs       job.Group
	K8s        k8sagent.Config
	Clients    *k8sagent.Clients `optional:"true"`
	Services   statedb.Table[*loadbalancer.ServiceRow]
	Nodes      statedb.Table[*corev1.Node]
	Policies   statedb.Table[*v2alpha1.CiliumL2AnnouncementPolicy]
	NodeLeases statedb.Table[*coordinationv1.Lease]
	Table      statedb.RWTable[*Announcement]
	Datapath   Datapath `optional:"true"`
	Reconciler reconciler.Params
}

func register(p params) error {
	if err := p.Config.Validate(); err != nil {
		return err
	}
	if !p.Config.EnableL2Announcements {
		return nil
	}
	switch {
	case !p.LB.KubeProxyReplacement:
		return errors.New("--enable-l2-announcements: needs --kube-proxy-replacement, which serves the addresses announced")
	case p.Clients == nil:
		return errors.New("--enable-l2-announcements: needs Kubernetes, whose Leases elect the announcers")
	case p.Datapath == nil:
		return errors.New("--enable-l2-announcements: needs the datapath")
	}
	db := p.Reconciler.DB
	events := newEventRecorder(p.Clients, p.K8s.K8sNodeName)
	changed := desired.NewSignal()
	timings := Timings{LeaseDuration: p.Config.LeaseDuration, RenewDeadline: p.Config.RenewDeadline, RetryPeriod: p.Config.RetryPeriod}
	leases := p.Clients.Kube.CoordinationV1()
	a := &announcer{
		p:       p,
		writer:  desired.NewWriter(db, p.Table, EntryIndex, func(a *Announcement) string { return a.Entry.String() }, (*Announcement).same),
		status:  newStatusWriter(p.Log, p.Clients.Cilium),
		events:  events,
		changed: changed,
		owned:   map[loadbalancer.ServiceName]bool{},
	}
	a.elections = &elections{
		log: p.Log, leases: leases, namespace: p.Config.K8sNamespace, identity: p.K8s.K8sNodeName,
		timings: timings, changed: changed, running: map[loadbalancer.ServiceName]*election{}, onLead: a.announced,
	}
	a.nodeLease = &nodeLease{log: p.Log, leases: leases.Leases(p.Config.K8sNamespace), node: p.K8s.K8sNodeName,
		timings: timings, changed: changed}
	a.peers = &peers{leaseDuration: p.Config.LeaseDuration}
	a.wake = time.AfterFunc(time.Hour, changed.Fire)
	a.wake.Stop()
	if _, err := desired.Register(p.Reconciler, p.Table, ops{dp: p.Datapath}); err != nil {
		return err
	}
	desired.Controller(p.Jobs, "l2-announcer", db, []desired.Input{
		desired.TableInput(p.Services), desired.TableInput(p.Nodes), desired.TableInput(p.Policies),
		desired.TableInput(p.NodeLeases), changed.Input(),
	}, a.run)
	// The datapath answers only while the agent beats: a node whose agent
	// died loses its Leases after their duration, and stops answering then.
	// The beats start once the table says what this run holds (entries a
	// previous run left are pruned then), and end when the agent stops,
	// which gives its Leases up.
	p.Jobs.Add(job.Timer("l2-heartbeat", func(context.Context) error {
		m := p.Datapath.Map()
		if m == nil || !a.written.Load() || a.stopped.Load() {
			return nil
		}
		return m.BeatL2(p.Config.LeaseDuration)
	}, time.Second))
	p.Jobs.Add(job.Timer("l2-lease-gc", a.collectLeases, time.Minute))
	p.Lifecycle.Append(cell.Hook{OnStop: func(cell.HookContext) error {
		a.stopped.Store(true)
		var err error
		if m := p.Datapath.Map(); m != nil {
			err = m.BeatL2(0) // silent from now: the Leases go next
		}
		a.wake.Stop()
		a.nodeLease.stop()
		a.elections.stop()
		events.shutdown()
		return err
	}})
	return nil
}

type announcer struct {
	p       params
	writer  *desired.Writer[string, *Announcement]
	status  *statusWriter
	events  *eventRecorder
	devices []spec.Device
	// changed wakes run: an election won or lost, a peer's Lease lapsing
	// (wake).
	changed *desired.Signal
	// Election by Service.
	elections *elections
	// Election by node: this node's Lease, the others', the wake at the
	// next lapse, and the Services this node owned at the last run.
	nodeLease *nodeLease
	peers     *peers
	wake      *time.Timer
	owned     map[loadbalancer.ServiceName]bool
	ownersIn  ownersInput
	// written: the table holds this run's entries; stopped: the agent
	// is stopping.
	written, stopped atomic.Bool
}

// run campaigns for the Services this node may announce, and writes the
// entries of those whose Leases it holds.
func (a *announcer) run(ctx context.Context, txn statedb.ReadTxn) error {
	if a.devices == nil {
		devs, err := a.p.Datapath.Devices()
		if err != nil {
			return err
		}
		a.devices = devs
	}
	node := Node{Name: a.p.K8s.K8sNodeName}
	if n, ok := tables.Get(txn, a.p.Nodes, a.p.K8s.K8sNodeName); ok {
		node.Labels = n.Labels
	}
	for _, d := range a.devices {
		node.Devices = append(node.Devices, d.Name)
	}
	var policies []Policy
	for obj := range a.p.Policies.All(txn) {
		pol, problems := PolicyOf(obj)
		a.status.report(ctx, obj, problems)
		if len(problems) == 0 {
			policies = append(policies, pol)
		}
	}
	var services []*loadbalancer.ServiceRow
	for s := range a.p.Services.All(txn) {
		services = append(services, s)
	}
	wanted := Wanted(node, policies, services)
	var owned map[loadbalancer.ServiceName]bool
	if a.p.Config.Election == ElectionNode {
		owned = a.electByNode(txn, node, policies, services)
	} else {
		owned = a.electByService(wanted)
	}

	rows := map[string]*Announcement{}
	for n, entries := range wanted {
		if !owned[n] {
			continue
		}
		for _, e := range entries {
			d, ok := a.device(e.Device)
			if !ok {
				continue
			}
			r, ok := rows[e.String()]
			if !ok {
				r = &Announcement{Entry: e, Ifindex: d.Ifindex, MAC: d.MAC, Status: reconciler.StatusPending()}
				rows[e.String()] = r
			}
			r.Services = append(r.Services, n)
		}
	}
	for _, r := range rows {
		slices.SortFunc(r.Services, func(a, b loadbalancer.ServiceName) int { return strings.Compare(a.String(), b.String()) })
	}
	if _, _, err := a.writer.Replace(rows); err != nil {
		return err
	}
	a.written.Store(true)
	return nil
}

func (a *announcer) device(name string) (spec.Device, bool) {
	for _, d := range a.devices {
		if d.Name == name {
			return d, true
		}
	}
	return spec.Device{}, false
}

// electByService campaigns for the Lease of each Service this node may
// announce, and returns those it holds.
func (a *announcer) electByService(wanted map[loadbalancer.ServiceName][]Entry) map[loadbalancer.ServiceName]bool {
	names := map[loadbalancer.ServiceName]bool{}
	for n := range wanted {
		names[n] = true
	}
	a.elections.sync(names)
	owned := map[loadbalancer.ServiceName]bool{}
	for n := range wanted {
		if a.elections.leads(n) {
			owned[n] = true
		}
	}
	return owned
}

// ownersInput is what the owners of the last run were computed from.
type ownersInput struct {
	nodes              string // the live nodes as Owners read them
	services, policies statedb.Revision
}

// electByNode returns the Services this node owns among the live nodes
// (Owners), itself included while its own Lease is renewed, and tells the
// Services it takes over.
func (a *announcer) electByNode(txn statedb.ReadTxn, self Node, policies []Policy, services []*loadbalancer.ServiceRow) map[loadbalancer.ServiceName]bool {
	if a.nodeLease.devices == nil {
		a.nodeLease.devices = append([]string{}, self.Devices...)
		a.nodeLease.start()
	}
	var leases []*coordinationv1.Lease
	for l := range a.p.NodeLeases.All(txn) {
		if l.Namespace == a.p.Config.K8sNamespace {
			leases = append(leases, l)
		}
	}
	live, next := a.peers.live(leases, time.Now())
	if !next.IsZero() {
		a.wake.Reset(time.Until(next))
	}
	var nodes []Node
	for _, name := range sortedNodes(live) {
		if name == self.Name {
			continue // this node knows better than its Lease's last copy
		}
		n := Node{Name: name, Devices: live[name]}
		if obj, ok := tables.Get(txn, a.p.Nodes, name); ok {
			n.Labels = obj.Labels
		}
		nodes = append(nodes, n)
	}
	if a.nodeLease.live.Load() {
		nodes = append(nodes, self)
	}
	// Every node's renewal wakes run; the owners change only with the live
	// nodes (their labels and devices), the Services or the policies.
	in := ownersInput{nodes: fmt.Sprint(nodes), services: a.p.Services.Revision(txn), policies: a.p.Policies.Revision(txn)}
	if in == a.ownersIn {
		return a.owned
	}
	a.ownersIn = in
	owned := map[loadbalancer.ServiceName]bool{}
	for s, owner := range Owners(nodes, policies, services) {
		if owner != self.Name {
			continue
		}
		owned[s] = true
		if !a.owned[s] {
			a.announced(s)
		}
	}
	a.owned = owned
	return owned
}

// collectLeases deletes the Leases of Services that are gone.
func (a *announcer) collectLeases(ctx context.Context) error {
	names := map[string]bool{}
	for s := range a.p.Services.All(a.p.Reconciler.DB.ReadTxn()) {
		names[LeaseName(s.Name)] = true
	}
	leases := a.p.Clients.Kube.CoordinationV1().Leases(a.p.Config.K8sNamespace)
	n, err := collectLeases(ctx, leases, func(name string) bool { return names[name] }, time.Now())
	if n > 0 {
		a.p.Log.Info("Deleted the announcement Leases of Services that are gone", "leases", n)
	}
	return err
}

// announced tells the Service's readers which node announces it.
func (a *announcer) announced(n loadbalancer.ServiceName) {
	db := a.p.Reconciler.DB
	row, _, ok := a.p.Services.Get(db.ReadTxn(), loadbalancer.ServiceNameIndex.Query(n.String()))
	if !ok {
		return
	}
	var addrs []string
	for _, ip := range append(append([]netip.Addr{}, row.LoadBalancerIPs...), row.ExternalIPs...) {
		addrs = append(addrs, ip.String())
	}
	a.events.announcing(row.Service, fmt.Sprintf("%s announces %s (Lease %s/%s)",
		a.p.K8s.K8sNodeName, strings.Join(addrs, ", "), a.p.Config.K8sNamespace, LeaseName(n)))
}
