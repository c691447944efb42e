// Package health collects the health of every module of the agent. Each
// module gets its own cell.Health scope (see ModuleProviders); the REST API
// and the /healthz probe read the whole picture from Registry.
package health

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
)

// Cell provides the Registry.
var Cell = cell.Module("health", "Health of every module",
	cell.Provide(NewRegistry),
)

// ModuleProviders gives every module a cell.Health named after it.
var ModuleProviders = cell.ModulePrivateProviders{
	func(r *Registry, id cell.FullModuleID) cell.Health { return r.Scope(id.String()) },
}

// JobGroup gives the module it is listed in a job.Group whose jobs report
// to the module's health.
var JobGroup = cell.ProvidePrivate(func(r job.Registry, h cell.Health, log *slog.Logger) job.Group {
	return r.NewGroup(h, job.WithLogger(log))
})

// NewHive is a hive whose modules report their health to the Registry;
// Cell must be among cells.
func NewHive(cells ...cell.Cell) *hive.Hive {
	opts := hive.DefaultOptions()
	opts.ModulePrivateProviders = ModuleProviders
	return hive.NewWithOptions(opts, cells...)
}

// Status is one scope's last report.
type Status struct {
	Scope   string     `json:"scope"`
	Level   cell.Level `json:"level"`
	Message string     `json:"message,omitempty"`
	Error   string     `json:"error,omitempty"`
	Since   time.Time  `json:"since"`
}

// Registry holds the latest status of every scope.
type Registry struct {
	mu     sync.Mutex
	status map[string]Status
	now    func() time.Time
}

// NewRegistry is empty.
func NewRegistry() *Registry {
	return &Registry{status: map[string]Status{}, now: time.Now}
}

// All lists every scope's status, sorted by scope.
func (r *Registry) All() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Status, 0, len(r.status))
	for _, k := range slices.Sorted(maps.Keys(r.status)) {
		out = append(out, r.status[k])
	}
	return out
}

// Degraded lists the scopes that report a degraded state. Scopes that
// have not reported yet (Unknown) do not count: a module that is still
// starting is not broken.
func (r *Registry) Degraded() []Status {
	var out []Status
	for _, s := range r.All() {
		if s.Level == cell.StatusDegraded {
			out = append(out, s)
		}
	}
	return out
}

func (r *Registry) set(scope string, level cell.Level, msg string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{Scope: scope, Level: level, Message: msg, Since: r.now()}
	if err != nil {
		s.Error = err.Error()
	}
	if old, ok := r.status[scope]; ok && old.Level == level {
		s.Since = old.Since
	}
	r.status[scope] = s
}

// Scope is a reporter for name; ModuleProviders makes one per module.
func (r *Registry) Scope(name string) cell.Health {
	r.set(name, cell.StatusUnknown, "", nil)
	return &reporter{r: r, name: name}
}

// reporter implements cell.Health for one scope.
type reporter struct {
	r    *Registry
	name string
}

func (h *reporter) OK(status string)      { h.r.set(h.name, cell.StatusOK, status, nil) }
func (h *reporter) Stopped(reason string) { h.r.set(h.name, cell.StatusStopped, reason, nil) }
func (h *reporter) Degraded(reason string, err error) {
	h.r.set(h.name, cell.StatusDegraded, reason, err)
}

func (h *reporter) NewScope(name string) cell.Health {
	return h.r.Scope(strings.Join([]string{h.name, name}, "."))
}

func (h *reporter) Close() {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	delete(h.r.status, h.name)
}
