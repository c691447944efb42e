package l2announce

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// ops writes the table into the datapath's responder map.
type ops struct{ dp Datapath }

func (o ops) mapOf() (Map, error) {
	if m := o.dp.Map(); m != nil {
		return m, nil
	}
	return nil, errors.New("l2 responder map not open yet")
}

func responder(a *Announcement) spec.L2Responder {
	return spec.L2Responder{Address: a.Address, Ifindex: a.Ifindex, MAC: a.MAC}
}

// Update implements reconciler.Operations: the entry, then a gratuitous
// ARP, so that the segment's caches follow a takeover at once.
func (o ops) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, a *Announcement) error {
	m, err := o.mapOf()
	if err != nil {
		return err
	}
	if err := m.UpsertL2Responder(responder(a)); err != nil {
		return err
	}
	return o.dp.GratuitousARP(responder(a))
}

// Delete implements reconciler.Operations.
func (o ops) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, a *Announcement) error {
	m, err := o.mapOf()
	if err != nil {
		return err
	}
	return m.DeleteL2Responder(a.Address, a.Ifindex)
}

// Prune implements reconciler.Operations: entries no row names go.
func (o ops) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*Announcement, statedb.Revision]) error {
	m, err := o.mapOf()
	if err != nil {
		return err
	}
	held, err := m.L2Responders()
	if err != nil {
		return err
	}
	type key struct {
		addr    string
		ifindex uint32
	}
	want := map[key]bool{}
	for a := range rows {
		want[key{a.Address.String(), a.Ifindex}] = true
	}
	var errs []error
	for _, h := range held {
		if !want[key{h.Address.String(), h.Ifindex}] {
			errs = append(errs, m.DeleteL2Responder(h.Address, h.Ifindex))
		}
	}
	return errors.Join(errs...)
}

// statusWriter sets a policy's conditions to what this agent made of it.
// Every agent reads a policy alike, so only the first to see a change
// writes; the others find the status already as they would write it.
type statusWriter struct {
	log    *slog.Logger
	cilium client.Interface
}

func newStatusWriter(log *slog.Logger, c client.Interface) *statusWriter {
	return &statusWriter{log: log, cilium: c}
}

// report makes p's conditions say problems: True with the error for each
// part the agent cannot use, False for the others that were True.
func (w *statusWriter) report(ctx context.Context, p *v2alpha1.CiliumL2AnnouncementPolicy, problems map[string]error) {
	conds := append([]metav1.Condition(nil), p.Status.Conditions...)
	changed := false
	for _, typ := range ConditionTypes {
		err, bad := problems[typ]
		old := meta.FindStatusCondition(conds, typ)
		if old == nil && !bad {
			continue
		}
		c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: "ok", ObservedGeneration: p.Generation}
		if bad {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, "error", err.Error()
		}
		if old != nil && old.Status == c.Status && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
			continue
		}
		meta.SetStatusCondition(&conds, c)
		changed = true
	}
	if !changed {
		return
	}
	upd := p.DeepCopy()
	upd.Status.Conditions = conds
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := w.cilium.CiliumV2alpha1().CiliumL2AnnouncementPolicies().UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		// Another agent wrote it first (a conflict), or the API server
		// is away: the next change tries again.
		w.log.Debug("L2 announcement policy status not written", "policy", p.Name, "error", err)
	}
}

// eventRecorder posts events on Services.
type eventRecorder struct {
	b   record.EventBroadcaster
	rec record.EventRecorder
}

func newEventRecorder(c *k8sagent.Clients, node string) *eventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Kube.CoreV1().Events("")})
	return &eventRecorder{b: b, rec: b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "cilium-agent", Host: node})}
}

// ReasonAnnouncing is the reason of the event a node posts on a Service
// when it takes over its announcement.
const ReasonAnnouncing = "L2Announcement"

func (r *eventRecorder) announcing(s loadbalancer.Service, msg string) {
	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: s.Name.Namespace, Name: s.Name.Name,
		UID: types.UID(s.UID)}
	r.rec.Event(ref, corev1.EventTypeNormal, ReasonAnnouncing, msg)
}

func (r *eventRecorder) shutdown() { r.b.Shutdown() }
