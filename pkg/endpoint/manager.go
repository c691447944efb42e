package endpoint

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/paths"
)

// PolicyGate is the policy engine as endpoints see it.
type PolicyGate interface {
	// Enforced says whether endpoints' programs judge connections by
	// their policy maps (enable-policy is not "never").
	Enforced() bool
	// AwaitPolicy returns once endpoint id's policy, computed for
	// identity, is in the datapath.
	AwaitPolicy(ctx context.Context, id uint16, identity identity.NumericIdentity) error
}

// AddressReleaser frees the pod address of a deleted endpoint.
type AddressReleaser interface {
	ReleaseOwner(owner string) error
}

// MaxID is the largest endpoint id: Cilium's endpoint ids fit 12 bits.
const MaxID = 4095

// Manager owns the node's endpoints. It is safe for concurrent use; one
// lock guards its state, and is not held while a change waits for the
// identity allocator, the reconciler or the policy engine (see busy). It
// writes what the datapath should hold into the endpoints table and waits
// for the endpoint reconciler (see RegisterReconciler) to program it; it
// never calls the kernel itself.
type Manager struct {
	log  *slog.Logger
	db   *statedb.DB
	tbl  statedb.RWTable[*EndpointRow]
	ids  IdentityAllocator
	ipam AddressReleaser
	// policy, when set, is the policy engine: endpoints enforce policy
	// as it says, and are ready once their policy is in the datapath.
	policy PolicyGate
	dir    string
	now    func() time.Time
	// initDone marks the table initialized once Restore wrote it: the
	// reconciler prunes nothing before, so that a restarting agent does
	// not unprogram the pods it is about to restore.
	initDone func(statedb.WriteTxn)

	mu          sync.Mutex
	byID        map[uint16]*Endpoint
	byContainer map[string]*Endpoint
	// busy are the containers whose endpoint is being created or
	// deleted, by container id.
	busy map[string]*busy
	// unrestored are endpoints whose identity failed to restore;
	// RetryRestore tries them again.
	unrestored map[uint16]bool
	skipped    error
}

// NewManager keeps its state files in dir and its rows in tbl. It touches
// nothing until Restore or Create.
func NewManager(log *slog.Logger, db *statedb.DB, tbl statedb.RWTable[*EndpointRow], ids IdentityAllocator, ipam AddressReleaser,
	policy PolicyGate, dir string) *Manager {
	txn := db.WriteTxn(tbl)
	done := tbl.RegisterInitializer(txn, "endpoint-restore")
	txn.Commit()
	return &Manager{log: log, db: db, tbl: tbl, ids: ids, ipam: ipam, policy: policy, dir: dir, now: time.Now, initDone: done,
		byID: map[uint16]*Endpoint{}, byContainer: map[string]*Endpoint{}, busy: map[string]*busy{}, unrestored: map[uint16]bool{}}
}

// Create makes the endpoint for s, and returns once its datapath is live.
// Asking again with the same spec returns the existing endpoint and
// created=false; a different spec for the same container is ErrConflict.
// Creates of different containers run at once: the lock is held only to
// reserve the container, its id, address and device (see busy) and to
// record the endpoint once its datapath is live.
func (m *Manager) Create(ctx context.Context, s Spec) (ep Endpoint, created bool, err error) {
	if err := s.Validate(); err != nil {
		return Endpoint{}, false, err
	}
	m.mu.Lock()
	// Whatever is under way for this container, its address or device
	// decides what s gets: wait for it, then look again.
	for {
		b, ok := m.busy[s.ContainerID]
		if !ok {
			b = m.busyConflictLocked(s)
		}
		if b == nil {
			break
		}
		if err := m.waitLocked(ctx, b); err != nil {
			return Endpoint{}, false, err
		}
	}
	e, err := m.startCreateLocked(s)
	if err != nil || e == nil {
		defer m.mu.Unlock()
		if err != nil {
			return Endpoint{}, false, err
		}
		return *m.byContainer[s.ContainerID], false, nil
	}
	b := m.reserveLocked(s, e.ID)
	m.mu.Unlock()

	err = m.bringUp(ctx, e)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(b)
	if err != nil {
		return Endpoint{}, false, err
	}
	m.byID[e.ID] = e
	m.byContainer[e.ContainerID] = e
	m.log.Info("endpoint created", "id", e.ID, "container", e.ContainerID, "pod", e.PodNamespace+"/"+e.PodName,
		"ipv4", e.IPv4, "identity", e.Identity)
	return *e, true, nil
}

// startCreateLocked checks s against the endpoints there are and picks
// the new endpoint's id. It returns nil and no error when the container
// has the endpoint s asks for already.
func (m *Manager) startCreateLocked(s Spec) (*Endpoint, error) {
	if old, ok := m.byContainer[s.ContainerID]; ok {
		if old.spec() != s {
			return nil, fmt.Errorf("container %s: %w", s.ContainerID, ErrConflict)
		}
		return nil, nil
	}
	for _, o := range m.byID {
		if o.IPv4 == s.IPv4 || o.HostIfName == s.HostIfName {
			return nil, fmt.Errorf("container %s: address or device in use by endpoint %d: %w",
				s.ContainerID, o.ID, ErrConflict)
		}
	}
	id, ok := m.freeIDLocked()
	if !ok {
		return nil, fmt.Errorf("container %s: all %d endpoint ids in use", s.ContainerID, MaxID)
	}
	return &Endpoint{ID: id, ContainerID: s.ContainerID, PodName: s.PodName, PodNamespace: s.PodNamespace,
		IPv4: s.IPv4, MAC: s.MAC, IfName: s.IfName, HostIfName: s.HostIfName, HostIfindex: s.HostIfindex,
		NetNSPath: s.NetNSPath, ReservedIdentity: s.ReservedIdentity, Created: m.now().UTC()}, nil
}

// bringUp gives e its identity, programs it and persists it; on failure
// it undoes all of that before it returns. It runs without the lock:
// e's container and id are reserved.
func (m *Manager) bringUp(ctx context.Context, e *Endpoint) (err error) {
	if e.Identity, err = m.allocateIdentity(ctx, e); err != nil {
		return fmt.Errorf("endpoint %d identity: %w", e.ID, err)
	}
	undo := func(err error) error {
		// The reconciler unprograms what it managed to program; the
		// id is free again once it has.
		err = errors.Join(err, m.unwant(e.ID))
		return errors.Join(err, m.awaitUnprogrammed(ctx, e.ID), m.releaseIdentity(ctx, e))
	}
	if err := m.program(ctx, e); err != nil {
		return undo(fmt.Errorf("program endpoint %d: %w", e.ID, err))
	}
	if err := m.persist(e); err != nil {
		return undo(err)
	}
	return nil
}

func (e *Endpoint) pod() Pod { return Pod{Namespace: e.PodNamespace, Name: e.PodName} }

// freeIDLocked is an id that no endpoint has, no busy container holds and
// no tombstone holds (its old programs may still be in the datapath).
func (m *Manager) freeIDLocked() (uint16, bool) {
	reserved := make(map[uint16]bool, len(m.busy))
	for _, b := range m.busy {
		reserved[b.id] = true
	}
	txn := m.db.ReadTxn()
	for id := uint16(1); id <= MaxID; id++ {
		if _, taken := m.byID[id]; taken || reserved[id] {
			continue
		}
		if _, _, held := m.tbl.Get(txn, IDIndex.Query(id)); !held {
			return id, true
		}
	}
	return 0, false
}

// ErrAgentOwned: the endpoint is the agent's own (the health endpoint),
// which the CNI plugin neither knows nor deletes.
var ErrAgentOwned = errors.New("endpoint is the agent's own")

// Delete removes the endpoint of the container: datapath, state file,
// identity and address. An unknown container is ErrNotFound, and an
// endpoint of the agent's own (see Spec.ReservedIdentity) ErrAgentOwned.
func (m *Manager) Delete(ctx context.Context, containerID string) (Endpoint, error) {
	return m.delete(ctx, containerID, false)
}

// DeleteOwn is Delete for the agent's own endpoints too.
func (m *Manager) DeleteOwn(ctx context.Context, containerID string) (Endpoint, error) {
	return m.delete(ctx, containerID, true)
}

func (m *Manager) delete(ctx context.Context, containerID string, own bool) (Endpoint, error) {
	m.mu.Lock()
	for {
		b, ok := m.busy[containerID]
		if !ok {
			break
		}
		if err := m.waitLocked(ctx, b); err != nil {
			return Endpoint{}, err
		}
	}
	e, ok := m.byContainer[containerID]
	if ok && e.ReservedIdentity != 0 && !own {
		m.mu.Unlock()
		return Endpoint{}, fmt.Errorf("container %s: endpoint %d: %w", containerID, e.ID, ErrAgentOwned)
	}
	if !ok {
		m.mu.Unlock()
		// The address may be held without an endpoint when an ADD
		// failed halfway; a delete must free it all the same.
		return Endpoint{}, errors.Join(fmt.Errorf("container %s: %w", containerID, ErrNotFound),
			m.ipam.ReleaseOwner(containerID))
	}
	if err := m.unwant(e.ID); err != nil {
		m.mu.Unlock()
		return Endpoint{}, err
	}
	delete(m.byID, e.ID)
	delete(m.byContainer, e.ContainerID)
	delete(m.unrestored, e.ID)
	// Until its programs are gone, the container, its address and device
	// stay reserved: a new endpoint that takes them waits.
	b := m.reserveLocked(e.spec(), e.ID)
	m.mu.Unlock()

	err := errors.Join(
		removeIfExists(m.stateFile(e.ID)),
		m.releaseIdentity(ctx, e),
		m.ipam.ReleaseOwner(e.ContainerID),
	)
	// The reconciler keeps retrying a failed unprogramming, and the id
	// stays taken until it succeeds; the caller hears of the failure.
	err = errors.Join(err, m.awaitUnprogrammed(ctx, e.ID))
	m.log.Info("endpoint deleted", "id", e.ID, "container", e.ContainerID, "error", err)

	m.mu.Lock()
	m.releaseLocked(b)
	m.mu.Unlock()
	return *e, err
}

// RefreshIdentity allocates the identity of the endpoint's pod again, as
// after a change of its labels, and reprograms the endpoint when the
// identity changed. It returns the endpoint as it is now.
func (m *Manager) RefreshIdentity(ctx context.Context, containerID string) (Endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byContainer[containerID]
	if !ok {
		return Endpoint{}, fmt.Errorf("container %s: %w", containerID, ErrNotFound)
	}
	num, err := m.allocateIdentity(ctx, e)
	if err != nil {
		return *e, fmt.Errorf("endpoint %d identity: %w", e.ID, err)
	}
	if num == e.Identity {
		return *e, nil
	}
	old := e.Identity
	e.Identity = num
	// The new identity is what the datapath should hold from now on,
	// even while the reconciler retries programming it.
	err = m.program(ctx, e)
	if err != nil {
		err = fmt.Errorf("reprogram endpoint %d: %w", e.ID, err)
	}
	m.log.Info("endpoint identity changed", "id", e.ID, "pod", e.PodNamespace+"/"+e.PodName, "from", old, "to", num)
	return *e, errors.Join(err, m.persist(e))
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// Get finds an endpoint by "container-id:<id>" or by its numeric id.
func (m *Manager) Get(name string) (Endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cid, ok := strings.CutPrefix(name, models.ContainerIDPrefix); ok {
		if e, ok := m.byContainer[cid]; ok {
			return *e, nil
		}
		return Endpoint{}, fmt.Errorf("%s: %w", name, ErrNotFound)
	}
	var id uint16
	if _, err := fmt.Sscan(name, &id); err == nil {
		if e, ok := m.byID[id]; ok {
			return *e, nil
		}
	}
	return Endpoint{}, fmt.Errorf("%s: %w", name, ErrNotFound)
}

// HasEndpoint tells whether the container has an endpoint, or one being
// created or deleted; IPAM asks it to find the addresses that no endpoint
// holds.
func (m *Manager) HasEndpoint(containerID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.byContainer[containerID]
	_, busy := m.busy[containerID]
	return ok || busy
}

// List is every endpoint by id.
func (m *Manager) List() []Endpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Endpoint, 0, len(m.byID))
	for _, id := range slices.Sorted(maps.Keys(m.byID)) {
		out = append(out, *m.byID[id])
	}
	return out
}

func (m *Manager) stateFile(id uint16) string {
	return filepath.Join(m.dir, fmt.Sprintf("%d.json", id))
}

func (m *Manager) persist(e *Endpoint) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("encode endpoint %d: %w", e.ID, err)
	}
	return paths.WriteFileAtomic(m.stateFile(e.ID), b)
}

// Restore loads the endpoints persisted by an earlier agent into the
// table, and waits for the reconciler to program them again. Their veths
// are the pods' and stay as they are; their programs are swapped in place.
// Once the table holds them, the reconciler prunes the datapath state of
// every other endpoint. An endpoint that cannot be programmed is kept (the
// reconciler retries it, and its pod's CNI DEL still finds it) and
// reported in the error.
func (m *Manager) Restore(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	loaded, loadErr := m.load()
	var errs []error
	if loadErr != nil {
		errs = append(errs, loadErr)
	}
	for _, e := range loaded {
		m.byID[e.ID] = e
		m.byContainer[e.ContainerID] = e
		if err := m.restoreLocked(ctx, e); err != nil {
			errs = append(errs, err)
			m.unrestored[e.ID] = true
		}
	}
	if loadErr == nil {
		// Pruning after a failed read would take live pods' state: the
		// table stays uninitialized and the reconciler prunes nothing.
		txn := m.db.WriteTxn(m.tbl)
		m.initDone(txn)
		txn.Commit()
	}
	for _, e := range loaded {
		if err := m.awaitProgrammed(ctx, e.ID); err != nil {
			errs = append(errs, fmt.Errorf("restore endpoint %d: %w", e.ID, err))
			m.unrestored[e.ID] = true
		}
	}
	// What a retry cannot mend: state files that do not load.
	m.skipped = loadErr
	m.log.Info("endpoints restored", "count", len(loaded))
	return errors.Join(errs...)
}

// load reads the state directory; files that do not parse are skipped
// and reported.
func (m *Manager) load() ([]*Endpoint, error) {
	entries, err := os.ReadDir(m.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", m.dir, err)
	}
	var out []*Endpoint
	var errs []error
	for _, de := range entries {
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".json") || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		path := filepath.Join(m.dir, de.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", path, err))
			continue
		}
		e := &Endpoint{}
		if err := json.Unmarshal(b, e); err != nil {
			errs = append(errs, fmt.Errorf("parse %s: %w", path, err))
			continue
		}
		if err := e.spec().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		if e.ID == 0 || e.ID > MaxID || m.stateFile(e.ID) != path {
			errs = append(errs, fmt.Errorf("%s: holds endpoint id %d", path, e.ID))
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Endpoint) int { return cmp.Compare(a.ID, b.ID) })
	return out, errors.Join(errs...)
}
