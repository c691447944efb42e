package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Mode is the agent's enable-policy setting, with Cilium's meaning.
type Mode string

const (
	// ModeDefault isolates an endpoint in a direction once a rule that
	// selects it says so.
	ModeDefault Mode = "default"
	// ModeAlways isolates every endpoint in both directions.
	ModeAlways Mode = "always"
	// ModeNever enforces nothing: every endpoint may talk to every peer.
	ModeNever Mode = "never"
)

// ParseMode reads the enable-policy flag.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeDefault, ModeAlways, ModeNever:
		return m, nil
	}
	return "", fmt.Errorf("enable-policy: %q is not one of default, always, never", s)
}

// Built-in origins.
var (
	// OriginAllowAll is the entry of a direction no rule isolates.
	OriginAllowAll = Origin{Kind: KindBuiltin, Name: "allow-all"}
	// OriginLocalhost lets the node reach its pods (kubelet probes), as
	// Cilium's allow-localhost=auto does.
	OriginLocalhost = Origin{Kind: KindBuiltin, Name: "allow-localhost"}
)

var directions = [...]spec.Direction{spec.Ingress, spec.Egress}

// EndpointInfo is what the engine needs of a local endpoint.
type EndpointInfo struct {
	ID       uint16
	Identity identity.NumericIdentity
	// NamedPorts are the pod's container ports with names, which its
	// ingress rules' named ports resolve to.
	NamedPorts NamedPorts
}

// filterSpec is one (rule, peer, port) that applies to an endpoint: the
// unit that entries are computed from.
type filterSpec struct {
	dir    spec.Direction
	deny   bool
	sel    Selector
	selKey string // sel.Key()
	port   Port
	origin Origin
	// proxyPort is the proxy that an allow with layer-7 rules (l7)
	// sends to.
	proxyPort uint16
	l7        *L7Rules
}

// filterKey identifies a filterSpec: two with the same key contribute
// the same entries.
type filterKey struct {
	dir       spec.Direction
	deny      bool
	sel       string
	port      Port
	origin    Origin
	proxyPort uint16
	l7        string // l7.Key()
}

func (fs filterSpec) key() filterKey {
	return filterKey{dir: fs.dir, deny: fs.deny, sel: fs.selKey, port: fs.port, origin: fs.origin, proxyPort: fs.proxyPort, l7: fs.l7.Key()}
}

// filter is a filterSpec of a local endpoint, with its cached selector.
type filter struct {
	filterSpec
	cached *cachedSelector
}

type contribKey struct {
	f  *filter
	id identity.NumericIdentity
}

// epState is the engine's state of one local endpoint: its filters, the
// entries each (filter, identity) contributed, and the resulting entries
// with the origins that want them.
type epState struct {
	info EndpointInfo
	// subject is the endpoint's identity as last known: kept when the
	// identity leaves the cache, so the endpoint keeps its policy.
	subject *Identity
	ready   bool // its identity is known and its filters computed
	enforce [3]bool
	// filters are the endpoint's filters by the origin of the rules
	// (or the built-in origin) they come from.
	filters map[Origin][]*filter
	// isolatedBy are the origins whose rules isolate the endpoint, with
	// the directions; isolating counts them by direction.
	isolatedBy map[Origin][3]bool
	isolating  [3]int
	// builtPorts are the named ports the filters' ingress entries
	// resolved.
	builtPorts NamedPorts
	contribs   map[contribKey][]spec.PolicyEntry
	entries    map[spec.PolicyEntry]map[Origin]int
	revision   uint64
	// keys counts the policy map keys of entries. overflow is set once
	// they would exceed the engine's limit: contributions stop, so that
	// no policy can make the engine hold more for an endpoint than its
	// map can; refused is the overflow last flushed, while the tables
	// hold the endpoint's policy of before.
	keys              int
	overflow, refused *Refusal
}

// Refusal is an endpoint's policy that its policy map cannot hold: the
// endpoint keeps the policy it had.
type Refusal struct {
	// Origin is the policy whose rules found no room.
	Origin Origin
	// Max is the size of the endpoint's policy map.
	Max int
}

func (r *Refusal) String() string {
	return fmt.Sprintf("%s needs more than %d policy map entries (--bpf-policy-map-max) for this endpoint; its previous policy stays in force",
		r.Origin, r.Max)
}

// Engine computes the policy map entries of the node's endpoints from
// the rules, the identities of the cluster and their named ports. It
// changes entries by delta: an identity that comes or goes touches only
// the entries of filters whose selectors select it. It is not safe for
// concurrent use; the agent runs it in one goroutine.
type Engine struct {
	mode           Mode
	allowLocalhost bool
	// maxKeys bounds each endpoint's policy map keys (0: no bound).
	maxKeys int
	cache   *selectorCache
	rules   map[Origin][]Rule
	// peerKeys are the Key of each rule's peers, by rule and peer: a
	// key is computed once per rule, not at each regeneration.
	peerKeys      map[Origin][][]string
	namedPorts    map[identity.NumericIdentity]NamedPorts
	allNamedPorts NamedPorts // every identity's, built when first asked; nil: not yet
	eps           map[uint16]*epState
	revision      uint64
	// cidrs are the CIDR identities of the prefixes that selectors name.
	cidrs        map[cidrKey]*cidrIdentity
	cidrIDs      map[identity.NumericIdentity]struct{} // the numbers cidrs have
	nextCIDR     identity.NumericIdentity
	cidrsChanged bool
	// restoredCIDRs are the CIDR identities of before a restart
	// (RestoreCIDRIdentities), restoredIDs their numbers.
	restoredCIDRs map[netip.Prefix]identity.NumericIdentity
	restoredIDs   map[identity.NumericIdentity]struct{}
	// fqdnNames are the names learned for addresses (SetFQDNNames).
	fqdnNames map[netip.Addr][]string

	dirtyEntries map[uint16]map[spec.PolicyEntry]struct{}
	dirtyEps     map[uint16]struct{}

	// proxyPorts are the layer-7 proxy's ports.
	proxyPorts ProxyPorts
}

// NewEngine returns an engine with no rules, identities or endpoints
// beyond the reserved identities.
func NewEngine(mode Mode) *Engine {
	e := &Engine{mode: mode, allowLocalhost: true, cache: newSelectorCache(), rules: map[Origin][]Rule{}, peerKeys: map[Origin][][]string{},
		namedPorts: map[identity.NumericIdentity]NamedPorts{}, eps: map[uint16]*epState{}, cidrs: map[cidrKey]*cidrIdentity{},
		cidrIDs:      map[identity.NumericIdentity]struct{}{},
		dirtyEntries: map[uint16]map[spec.PolicyEntry]struct{}{}, dirtyEps: map[uint16]struct{}{}}
	for id := identity.Host; id <= identity.WorldIPv6; id++ {
		if r, ok := identity.ReservedIdentity(id); ok {
			e.UpsertIdentity(&Identity{ID: id, Labels: r.Labels})
		}
	}
	e.SetRules(OriginHealthEndpoint, healthEndpointRules())
	return e
}

// ProxyPorts are the ports of the layer-7 proxy's parsers on the node:
// HTTP for egress rules, HTTPIngress for ingress rules (the port tells the
// proxy whose rules judge a connection), DNS (egress only).
type ProxyPorts struct {
	HTTP, HTTPIngress, DNS uint16
}

// port is the proxy port of an allow of parser's rules in dir; 0: none.
func (p ProxyPorts) port(parser L7Parser, dir spec.Direction) uint16 {
	switch {
	case parser == ParserHTTP && dir == spec.Egress:
		return p.HTTP
	case parser == ParserHTTP && dir == spec.Ingress:
		return p.HTTPIngress
	case parser == ParserDNS && dir == spec.Egress:
		return p.DNS
	}
	return 0
}

// SetProxyPorts names the ports of the layer-7 proxy's parsers, which
// allows with layer-7 rules send their connections to. A parser with no
// port makes those allows allow nothing: layer-7 rules are never
// bypassed. Set before rules come in.
func (e *Engine) SetProxyPorts(p ProxyPorts) { e.proxyPorts = p }

// EndpointCount is how many local endpoints the engine knows.
func (e *Engine) EndpointCount() int { return len(e.eps) }

// RulesOf returns the rules that origin's object holds now.
func (e *Engine) RulesOf(origin Origin) []Rule { return e.rules[origin] }

// LimitEntries refuses, from now on, an endpoint's policy that would take
// more than n keys of its policy map: the endpoint keeps its policy of
// before (EndpointStatus.Refused), and the engine stops computing for it
// until a change could make it fit. 0: no limit.
func (e *Engine) LimitEntries(n int) { e.maxKeys = n }

// Identity returns a known identity.
func (e *Engine) Identity(num identity.NumericIdentity) (*Identity, bool) {
	id, ok := e.cache.ids[num]
	return id, ok && num != identity.Unknown
}

// UpsertIdentity adds an identity (or replaces one with the same number).
func (e *Engine) UpsertIdentity(id *Identity) {
	if id.ID == identity.Unknown {
		return
	}
	added, removed := e.cache.upsert(id)
	for _, cs := range removed {
		for f, ep := range cs.users {
			e.drop(ep, f, id.ID)
		}
	}
	for _, cs := range added {
		for f, ep := range cs.users {
			e.contribute(ep, f, id.ID)
		}
	}
	for _, ep := range e.eps {
		if ep.info.Identity == id.ID && !ep.ready {
			e.regenerate(ep)
		}
	}
}

// DeleteIdentity forgets an identity: entries for it go.
func (e *Engine) DeleteIdentity(num identity.NumericIdentity) {
	for _, cs := range e.cache.remove(num) {
		for f, ep := range cs.users {
			e.drop(ep, f, num)
		}
	}
}

// SetNamedPorts records the named container ports of the pods with an
// identity, which egress rules' named ports resolve to.
func (e *Engine) SetNamedPorts(num identity.NumericIdentity, ports NamedPorts) {
	if slices.Equal(e.namedPorts[num], ports) {
		return
	}
	if len(ports) == 0 {
		delete(e.namedPorts, num)
	} else {
		e.namedPorts[num] = slices.Clone(ports)
	}
	e.allNamedPorts = nil
	// The wildcard's and CIDR identities' entries resolve names over
	// every identity's ports.
	for _, ep := range e.eps {
		for _, fl := range ep.filters {
			for _, f := range fl {
				if f.dir != spec.Egress || f.port.Name == "" {
					continue
				}
				for id := range f.cached.ids {
					if id == num || e.resolvesOverAll(id) {
						e.drop(ep, f, id)
						e.contribute(ep, f, id)
					}
				}
			}
		}
	}
}

// SetRules replaces the rules that origin's object holds (none: the
// object is gone). The filters of origin are recomputed on the
// endpoints selected before or after, and nothing else: a policy
// created beside a thousand others costs its own rules.
func (e *Engine) SetRules(origin Origin, rules []Rule) {
	old := e.rules[origin]
	if len(rules) == 0 {
		delete(e.rules, origin)
		delete(e.peerKeys, origin)
	} else {
		e.rules[origin] = rules
		keys := make([][]string, len(rules))
		for i, r := range rules {
			for _, p := range r.Peers {
				keys[i] = append(keys[i], p.Key())
			}
		}
		e.peerKeys[origin] = keys
	}
	for _, ep := range e.eps {
		if ep.ready && (selectsAny(old, ep.subject) || selectsAny(rules, ep.subject)) {
			e.dirtyEps[ep.info.ID] = struct{}{}
			e.syncOrigin(ep, origin)
			e.syncBuiltins(ep)
		}
	}
}

func selectsAny(rules []Rule, subject *Identity) bool {
	return slices.ContainsFunc(rules, func(r Rule) bool { return r.Subject.Selects(subject) })
}

// UpsertEndpoint adds a local endpoint or recomputes a changed one.
func (e *Engine) UpsertEndpoint(info EndpointInfo) {
	ep, ok := e.eps[info.ID]
	if ok && ep.info.Identity == info.Identity && slices.Equal(ep.info.NamedPorts, info.NamedPorts) {
		return
	}
	if !ok {
		ep = &epState{contribs: map[contribKey][]spec.PolicyEntry{}, entries: map[spec.PolicyEntry]map[Origin]int{},
			filters: map[Origin][]*filter{}, isolatedBy: map[Origin][3]bool{}}
		e.eps[info.ID] = ep
	}
	ep.info = info
	ep.info.NamedPorts = slices.Clone(info.NamedPorts)
	e.regenerate(ep)
}

// DeleteEndpoint forgets a local endpoint and its entries.
func (e *Engine) DeleteEndpoint(id uint16) {
	ep, ok := e.eps[id]
	if !ok {
		return
	}
	e.clear(ep)
	delete(e.eps, id)
	e.dirtyEps[id] = struct{}{}
}

// regenerate recomputes an endpoint's filters and entries from every
// rule. A filter that stays keeps its selector and its entries as they
// are: only those that come or go change.
func (e *Engine) regenerate(ep *epState) {
	e.dirtyEps[ep.info.ID] = struct{}{}
	if id, ok := e.Identity(ep.info.Identity); ok {
		ep.subject = id
	}
	ep.ready = ep.subject != nil && ep.subject.ID == ep.info.Identity
	if !ep.ready {
		// Its new identity is not known yet: it keeps the entries it has
		// until it is.
		return
	}
	if !slices.Equal(ep.builtPorts, ep.info.NamedPorts) {
		// Ingress entries resolved the endpoint's old named ports.
		e.clear(ep)
		ep.builtPorts = ep.info.NamedPorts
	}
	for origin := range ep.filters {
		if _, ok := e.rules[origin]; !ok && origin.Kind != KindBuiltin {
			e.syncOrigin(ep, origin)
		}
	}
	for origin := range e.rules {
		e.syncOrigin(ep, origin)
	}
	e.syncBuiltins(ep)
}

// syncOrigin recomputes the filters of ep that origin's rules make, and
// whether they isolate it.
func (e *Engine) syncOrigin(ep *epState, origin Origin) {
	specs, isolates := e.originFilters(origin, ep.subject)
	e.setFilters(ep, origin, specs)
	old := ep.isolatedBy[origin]
	for _, d := range directions {
		ep.isolating[d] += b2i(isolates[d]) - b2i(old[d])
	}
	if isolates == ([3]bool{}) {
		delete(ep.isolatedBy, origin)
	} else {
		ep.isolatedBy[origin] = isolates
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// syncBuiltins sets ep's enforcement from the rules that isolate it, and
// the built-in filters that follow from it.
func (e *Engine) syncBuiltins(ep *epState) {
	var isolated [3]bool
	for _, d := range directions {
		isolated[d] = ep.isolating[d] > 0
	}
	ep.enforce = e.enforcement(isolated)
	allowAll, localhost := e.builtinFilters(ep.enforce)
	e.setFilters(ep, OriginAllowAll, allowAll)
	e.setFilters(ep, OriginLocalhost, localhost)
}

// setFilters makes ep's filters of origin those of specs. A filter that
// stays keeps its selector and its entries.
func (e *Engine) setFilters(ep *epState, origin Origin, specs []filterSpec) {
	old := ep.filters[origin]
	if len(old) == 0 && len(specs) == 0 {
		return
	}
	kept := map[filterKey][]*filter{}
	for _, f := range old {
		k := f.key()
		kept[k] = append(kept[k], f)
	}
	filters := make([]*filter, 0, len(specs))
	for _, fs := range specs {
		k := fs.key()
		if fl := kept[k]; len(fl) > 0 {
			filters = append(filters, fl[len(fl)-1])
			kept[k] = fl[:len(fl)-1]
			continue
		}
		f := &filter{filterSpec: fs, cached: e.acquire(fs.sel)}
		f.cached.users[f] = ep
		filters = append(filters, f)
		for id := range f.cached.ids {
			e.contribute(ep, f, id)
		}
	}
	for _, fl := range kept {
		for _, f := range fl {
			e.dropFilter(ep, f)
		}
	}
	if len(filters) == 0 {
		delete(ep.filters, origin)
	} else {
		ep.filters[origin] = filters
	}
}

// rebuild computes a refused endpoint's policy again from scratch, to
// see whether it fits now: its partial state goes without a trace in the
// tables, which hold its policy of before.
func (e *Engine) rebuild(ep *epState) {
	for _, fl := range ep.filters {
		for _, f := range fl {
			delete(f.cached.users, f)
			e.release(f.cached)
		}
	}
	ep.filters, ep.isolatedBy, ep.isolating = map[Origin][]*filter{}, map[Origin][3]bool{}, [3]int{}
	ep.contribs, ep.entries = map[contribKey][]spec.PolicyEntry{}, map[spec.PolicyEntry]map[Origin]int{}
	ep.keys, ep.overflow = 0, nil
	delete(e.dirtyEntries, ep.info.ID)
	e.regenerate(ep)
}

// clear removes every filter of ep and the entries they contributed.
func (e *Engine) clear(ep *epState) {
	for _, fl := range ep.filters {
		for _, f := range fl {
			e.dropFilter(ep, f)
		}
	}
	ep.filters, ep.isolatedBy, ep.isolating = map[Origin][]*filter{}, map[Origin][3]bool{}, [3]int{}
}

// dropFilter removes a filter of ep and the entries it contributed.
func (e *Engine) dropFilter(ep *epState, f *filter) {
	for id := range f.cached.ids {
		e.drop(ep, f, id)
	}
	delete(f.cached.users, f)
	e.release(f.cached)
}

// filtersFor lists what applies to an endpoint with identity subject:
// the (rule, peer, port) triples of the rules that select it, and the
// built-in ones; and whether it is isolated in each direction. It is
// what regenerate computes, origin by origin.
func (e *Engine) filtersFor(subject *Identity) (out []filterSpec, enforce [3]bool) {
	var isolated [3]bool
	for origin := range e.rules {
		specs, iso := e.originFilters(origin, subject)
		out = append(out, specs...)
		for _, d := range directions {
			isolated[d] = isolated[d] || iso[d]
		}
	}
	enforce = e.enforcement(isolated)
	allowAll, localhost := e.builtinFilters(enforce)
	return append(append(out, allowAll...), localhost...), enforce
}

// originFilters lists the (rule, peer, port) triples of origin's rules
// that select subject, and the directions those rules isolate it in.
func (e *Engine) originFilters(origin Origin, subject *Identity) (out []filterSpec, isolates [3]bool) {
	if e.mode == ModeNever {
		return nil, isolates
	}
	keys := e.peerKeys[origin]
	for i, r := range e.rules[origin] {
		if !r.Subject.Selects(subject) {
			continue
		}
		isolates[r.Direction] = isolates[r.Direction] || r.DefaultDeny
		rulePorts := r.Ports
		if len(rulePorts) == 0 {
			rulePorts = []Port{{}}
		}
		var proxyPort uint16
		var l7 *L7Rules
		if r.L7 != nil && !r.Deny {
			if proxyPort = e.proxyPorts.port(r.L7.Parser, r.Direction); proxyPort == 0 {
				continue
			}
			l7 = r.L7
		}
		for j, peer := range r.Peers {
			for _, p := range rulePorts {
				out = append(out, filterSpec{dir: r.Direction, deny: r.Deny, sel: peer, selKey: keys[i][j], port: p, origin: r.Origin,
					proxyPort: proxyPort, l7: l7})
			}
		}
	}
	return out, isolates
}

// enforcement is whether an endpoint that rules isolate as isolated says
// is enforced in each direction, under the agent's mode.
func (e *Engine) enforcement(isolated [3]bool) [3]bool {
	switch e.mode {
	case ModeAlways:
		return [3]bool{spec.Ingress: true, spec.Egress: true}
	case ModeNever:
		return [3]bool{}
	}
	return isolated
}

// builtinFilters are the filters that enforcement adds: allow-all in a
// direction not enforced, and the node's access to an endpoint enforced
// at ingress.
func (e *Engine) builtinFilters(enforce [3]bool) (allowAll, localhost []filterSpec) {
	for _, d := range directions {
		if !enforce[d] {
			allowAll = append(allowAll, filterSpec{dir: d, sel: Wildcard{}, selKey: Wildcard{}.Key(), origin: OriginAllowAll})
		}
	}
	if enforce[spec.Ingress] && e.allowLocalhost {
		host := IdentitySet{Name: "entity:host", IDs: []identity.NumericIdentity{identity.Host}}
		localhost = append(localhost, filterSpec{dir: spec.Ingress, sel: host, selKey: host.Key(), origin: OriginLocalhost})
	}
	return allowAll, localhost
}

func compareOrigins(a, b Origin) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// entriesFor is what filter f contributes for remote identity id. Named
// ports resolve on the endpoint for ingress and on the peer for egress.
func (e *Engine) entriesFor(f filterSpec, id identity.NumericIdentity, own NamedPorts) []spec.PolicyEntry {
	ports := own
	if f.dir == spec.Egress {
		ports = e.peerPorts(id)
	}
	var out []spec.PolicyEntry
	for _, l := range f.port.resolve(ports) {
		ent := spec.PolicyEntry{Direction: f.dir, Identity: id, Protocol: l.proto, Port: l.port, EndPort: l.endPort, Deny: f.deny, ProxyPort: f.proxyPort}
		if ent.EndPort <= ent.Port {
			ent.EndPort = 0
		}
		out = append(out, ent)
	}
	return out
}

// peerPorts are the named ports of a peer identity; for the wildcard
// and for CIDR identities, which stand for addresses and not for pods,
// those of every identity (as Cilium resolves every egress named port).
func (e *Engine) peerPorts(id identity.NumericIdentity) NamedPorts {
	if !e.resolvesOverAll(id) {
		return e.namedPorts[id]
	}
	if e.allNamedPorts == nil {
		e.allNamedPorts = NamedPorts{}
		for _, ps := range e.namedPorts {
			e.allNamedPorts = append(e.allNamedPorts, ps...)
		}
	}
	return e.allNamedPorts
}

// resolvesOverAll says whether names of a peer resolve over every
// identity's named ports: the wildcard's and CIDR identities'.
func (e *Engine) resolvesOverAll(id identity.NumericIdentity) bool {
	ident, ok := e.cache.ids[id]
	return !ok || id == identity.Unknown || ident.Prefix.IsValid()
}

func (e *Engine) contribute(ep *epState, f *filter, id identity.NumericIdentity) {
	k := contribKey{f, id}
	if _, ok := ep.contribs[k]; ok || ep.overflow != nil {
		return
	}
	ents := e.entriesFor(f.filterSpec, id, ep.info.NamedPorts)
	if e.maxKeys > 0 {
		added := 0
		for _, ent := range ents {
			if ep.entries[ent] == nil {
				added += ent.Keys()
			}
		}
		if ep.keys+added > e.maxKeys {
			ep.overflow = &Refusal{Origin: f.origin, Max: e.maxKeys}
			e.dirtyEps[ep.info.ID] = struct{}{}
			return
		}
	}
	ep.contribs[k] = ents
	for _, ent := range ents {
		origins := ep.entries[ent]
		if origins == nil {
			origins = map[Origin]int{}
			ep.entries[ent] = origins
			ep.keys += ent.Keys()
		}
		origins[f.origin]++
		e.markDirty(ep, ent)
	}
}

func (e *Engine) drop(ep *epState, f *filter, id identity.NumericIdentity) {
	k := contribKey{f, id}
	ents, ok := ep.contribs[k]
	if !ok {
		if ep.overflow != nil {
			// Contributions stopped at the overflow: what goes may be
			// what did not fit, and the policy may fit now.
			e.dirtyEps[ep.info.ID] = struct{}{}
		}
		return
	}
	delete(ep.contribs, k)
	for _, ent := range ents {
		origins := ep.entries[ent]
		if origins[f.origin]--; origins[f.origin] <= 0 {
			delete(origins, f.origin)
		}
		if len(origins) == 0 {
			delete(ep.entries, ent)
			ep.keys -= ent.Keys()
		}
		e.markDirty(ep, ent)
	}
}

func (e *Engine) markDirty(ep *epState, ent spec.PolicyEntry) {
	d := e.dirtyEntries[ep.info.ID]
	if d == nil {
		d = map[spec.PolicyEntry]struct{}{}
		e.dirtyEntries[ep.info.ID] = d
	}
	d[ent] = struct{}{}
	e.dirtyEps[ep.info.ID] = struct{}{}
}
