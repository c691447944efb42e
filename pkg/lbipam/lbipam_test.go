package lbipam

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func cidrPool(name, cidr string, age int) Pool {
	return Pool{Name: name, Created: t0.Add(time.Duration(age) * time.Minute),
		Ranges: []Range{CIDRRange(netip.MustParsePrefix(cidr), true)}}
}

// svc is a Service of namespace default created age minutes after t0,
// on TCP port 80.
func svc(name string, age int) Service {
	n := Name{"default", name}
	return Service{Name: n, Created: t0.Add(time.Duration(age) * time.Minute), UID: "uid-" + name,
		Labels: ServiceLabels(n, nil), Ports: []Port{{80, "TCP"}}}
}

func byName(t *testing.T, as []Assignment) map[string]Assignment {
	t.Helper()
	out := map[string]Assignment{}
	for _, a := range as {
		out[a.Service.String()] = a
	}
	return out
}

// requireAddrs checks that each Service got exactly the addresses given,
// satisfied.
func requireAddrs(t *testing.T, as []Assignment, want map[string][]string) {
	t.Helper()
	got := byName(t, as)
	for name, w := range want {
		a := got["default/"+name]
		if !a.Satisfied || a.Reason != ReasonSatisfied || !slices.Equal(a.Addrs, addrs(w...)) {
			t.Errorf("%s: %+v, want satisfied with %v", name, a, w)
		}
	}
}

// record is what the operator writes back: each Service's status.
func record(svcs []Service, as []Assignment) []Service {
	got := map[Name][]netip.Addr{}
	for _, a := range as {
		got[a.Service] = a.Addrs
	}
	out := slices.Clone(svcs)
	for i := range out {
		out[i].Current = got[out[i].Name]
	}
	return out
}

func TestCIDRRange(t *testing.T) {
	for _, c := range []struct {
		cidr     string
		allow    bool
		from, to string
	}{
		{"10.0.0.0/24", true, "10.0.0.0", "10.0.0.255"},
		{"10.0.0.0/24", false, "10.0.0.1", "10.0.0.254"},
		{"10.0.0.7/30", false, "10.0.0.5", "10.0.0.6"},
		// Blocks of one or two addresses keep them all.
		{"10.0.0.4/31", false, "10.0.0.4", "10.0.0.5"},
		{"10.0.0.9/32", false, "10.0.0.9", "10.0.0.9"},
		{"2001:db8::/126", false, "2001:db8::1", "2001:db8::2"},
		{"2001:db8::/127", false, "2001:db8::", "2001:db8::1"},
	} {
		r := CIDRRange(netip.MustParsePrefix(c.cidr), c.allow)
		if r.From != netip.MustParseAddr(c.from) || r.To != netip.MustParseAddr(c.to) {
			t.Errorf("CIDRRange(%s, %v) = %s, want %s-%s", c.cidr, c.allow, r, c.from, c.to)
		}
	}
}

// Services get the pool's lowest free addresses, oldest first; written
// back as their status, they keep them whatever happens to the others, in
// whatever order a restarted operator reads them.
func TestStatusIsTheRecord(t *testing.T) {
	pools := []Pool{cidrPool("pool", "198.51.100.0/29", 0)}
	svcs := []Service{svc("b", 2), svc("a", 1), svc("c", 3)}
	as, _ := Allocate(pools, svcs)
	requireAddrs(t, as, map[string][]string{"a": {"198.51.100.0"}, "b": {"198.51.100.1"}, "c": {"198.51.100.2"}})

	// a goes; a new Service takes a's address, b and c move nowhere.
	svcs = record(svcs, as)
	svcs = append(slices.DeleteFunc(svcs, func(s Service) bool { return s.Name.Name == "a" }), svc("d", 4))
	as, _ = Allocate(pools, svcs)
	requireAddrs(t, as, map[string][]string{"b": {"198.51.100.1"}, "c": {"198.51.100.2"}, "d": {"198.51.100.0"}})

	// A restart reads the Services in another order and, where the record
	// differs from what a fresh allocation would give, keeps the record.
	svcs = record(svcs, as)
	svcs[0].Current, svcs[1].Current = addrs("198.51.100.5"), addrs("198.51.100.6")
	slices.Reverse(svcs)
	as, _ = Allocate(pools, svcs)
	requireAddrs(t, as, map[string][]string{svcs[2].Name.Name: {"198.51.100.5"}, svcs[1].Name.Name: {"198.51.100.6"},
		svcs[0].Name.Name: {"198.51.100.0"}})
}

// A record that no longer holds is served again: an address outside
// every pool, one that two Services claim without a sharing key (the
// older keeps it), one in a pool that stopped selecting the Service.
func TestRecordThatNoLongerHolds(t *testing.T) {
	pool := cidrPool("pool", "198.51.100.0/30", 0)
	pool.Selects = func(l map[string]string) bool { return l["team"] != "gone" }
	old, young, moved, outside := svc("old", 1), svc("young", 2), svc("moved", 3), svc("outside", 4)
	old.Current, young.Current = addrs("198.51.100.2"), addrs("198.51.100.2")
	moved.Current, moved.Labels["team"] = addrs("198.51.100.3"), "gone"
	outside.Current = addrs("203.0.113.1")
	as, _ := Allocate([]Pool{pool}, []Service{young, moved, outside, old})
	requireAddrs(t, as, map[string][]string{"old": {"198.51.100.2"}, "young": {"198.51.100.0"}, "outside": {"198.51.100.1"}})
	if a := byName(t, as)["default/moved"]; a.Satisfied || a.Reason != ReasonNoPool || len(a.Addrs) != 0 {
		t.Errorf("moved: %+v, want no_pool", a)
	}
}

// Addresses asked for by name: given when free in a pool that selects the
// Service, refused with Cilium's reasons otherwise.
func TestRequested(t *testing.T) {
	open := cidrPool("open", "198.51.100.0/28", 0)
	picky := cidrPool("picky", "192.0.2.0/28", 1)
	picky.Selects = func(l map[string]string) bool { return l[LabelServiceNamespace] == "other" }
	ask := func(name string, age int, ips ...string) Service {
		s := svc(name, age)
		s.Requested = addrs(ips...)
		return s
	}
	svcs := []Service{
		ask("first", 1, "198.51.100.7", "198.51.100.9"),
		ask("taken", 2, "198.51.100.7"),
		ask("nowhere", 3, "203.0.113.1"),
		ask("mismatch", 4, "192.0.2.3"),
		svc("any", 5),
	}
	as, _ := Allocate([]Pool{open, picky}, svcs)
	requireAddrs(t, as, map[string][]string{"first": {"198.51.100.7", "198.51.100.9"}, "any": {"198.51.100.0"}})
	got := byName(t, as)
	for name, reason := range map[string]string{"taken": ReasonAlreadyAllocated, "nowhere": ReasonNoPool, "mismatch": ReasonPoolSelectorMismatch} {
		if a := got["default/"+name]; a.Satisfied || a.Reason != reason || a.Message == "" || len(a.Addrs) != 0 {
			t.Errorf("%s: %+v, want unsatisfied for %s", name, a, reason)
		}
	}
	// The record of a Service that now asks for other addresses does not
	// hold: it gets what it asks for.
	first := svcs[0]
	first.Current, first.Requested = addrs("198.51.100.7", "198.51.100.9"), addrs("198.51.100.8")
	as, _ = Allocate([]Pool{open}, []Service{first})
	requireAddrs(t, as, map[string][]string{"first": {"198.51.100.8"}})
}

// Services with one sharing key share an address when Cilium's rules
// allow it, and otherwise get their own.
func TestSharing(t *testing.T) {
	pools := []Pool{cidrPool("pool", "198.51.100.0/28", 0)}
	share := func(name, ns string, age int, port uint16, shareWith ...string) Service {
		s := svc(name, age)
		s.Name.Namespace = ns
		s.Labels = ServiceLabels(s.Name, nil)
		s.SharingKey, s.Ports, s.ShareWith = "key", []Port{{port, "TCP"}}, shareWith
		return s
	}
	udp := share("udp", "default", 3, 80)
	udp.Ports = []Port{{80, "UDP"}}
	local := share("local", "default", 7, 90)
	local.ExternalLocal, local.Selector = true, "app=web"
	svcs := []Service{
		share("web", "default", 1, 80),
		share("dns", "default", 2, 53),
		udp,                              // another protocol on the same port: shares
		share("clash", "default", 4, 80), // the same port: its own address
		share("guest", "other", 5, 8080, "default"), // allows default, default does not allow it
		share("friend", "third", 6, 8081, "*"),      // the same
		local,                                       // Local against Cluster: its own address
	}
	as, _ := Allocate(pools, svcs)
	requireAddrs(t, as, map[string][]string{"web": {"198.51.100.0"}, "dns": {"198.51.100.0"}, "udp": {"198.51.100.0"},
		"clash": {"198.51.100.1"}})
	got := byName(t, as)
	for _, n := range []string{"other/guest", "third/friend", "default/local"} {
		if a := got[n]; !a.Satisfied || a.Addrs[0] == netip.MustParseAddr("198.51.100.0") {
			t.Errorf("%s: %+v, want an address of its own", n, a)
		}
	}

	// Both sides allowing the other's namespace: shared.
	web := share("web", "default", 1, 80, "other")
	guest := share("guest", "other", 5, 8080, "default")
	as, _ = Allocate(pools, []Service{web, guest})
	if g := byName(t, as); !slices.Equal(g["other/guest"].Addrs, addrs("198.51.100.0")) {
		t.Errorf("guest: %+v, want web's address", g["other/guest"])
	}

	// An address asked for that a Service holds: shared only when both
	// have the key and may share.
	ask := share("ask", "default", 8, 443)
	ask.Requested = addrs("198.51.100.0")
	noKey := svc("nokey", 9)
	noKey.Requested, noKey.Ports = addrs("198.51.100.0"), []Port{{444, "TCP"}}
	clash := share("clash2", "default", 10, 80)
	clash.Requested = addrs("198.51.100.0")
	as, _ = Allocate(pools, []Service{web, ask, noKey, clash})
	got = byName(t, as)
	requireAddrs(t, as, map[string][]string{"web": {"198.51.100.0"}, "ask": {"198.51.100.0"}})
	if a := got["default/nokey"]; a.Satisfied || a.Reason != ReasonAlreadyAllocated {
		t.Errorf("nokey: %+v, want already_allocated", a)
	}
	if a := got["default/clash2"]; a.Satisfied || a.Reason != ReasonAlreadyAllocatedShared || !strings.Contains(a.Message, "port") {
		t.Errorf("clash2: %+v, want already_allocated_incompatible_service naming the port", a)
	}
}

// A pool that is out of addresses says so, in its counts and in the
// Service's condition; a disabled pool hands out nothing new and keeps
// what it gave.
func TestExhaustedAndDisabled(t *testing.T) {
	small := Pool{Name: "small", Ranges: []Range{{From: netip.MustParseAddr("198.51.100.10"), To: netip.MustParseAddr("198.51.100.11")}}}
	as, st := Allocate([]Pool{small}, []Service{svc("a", 1), svc("b", 2), svc("c", 3)})
	requireAddrs(t, as, map[string][]string{"a": {"198.51.100.10"}, "b": {"198.51.100.11"}})
	if c := byName(t, as)["default/c"]; c.Satisfied || c.Reason != ReasonOutOfIPs {
		t.Errorf("c: %+v, want out_of_ips", c)
	}
	if want := []PoolStatus{{Name: "small", Total: "2", Used: "2", Available: "0"}}; !reflect.DeepEqual(st, want) {
		t.Errorf("pool status %+v, want %+v", st, want)
	}

	small.Disabled = true
	a := svc("a", 1)
	a.Current = addrs("198.51.100.10")
	as, st = Allocate([]Pool{small}, []Service{a, svc("new", 5)})
	requireAddrs(t, as, map[string][]string{"a": {"198.51.100.10"}})
	if n := byName(t, as)["default/new"]; n.Satisfied || n.Reason != ReasonNoPool {
		t.Errorf("new: %+v, want no_pool (the only pool is disabled)", n)
	}
	if st[0].Used != "1" || st[0].Available != "1" {
		t.Errorf("disabled pool status %+v, want 1 used, 1 available", st[0])
	}
}

// Pools whose ranges overlap: the younger one (and one that overlaps
// itself) is in conflict and hands out nothing; the older one serves.
func TestPoolConflicts(t *testing.T) {
	older := cidrPool("b-older", "198.51.100.0/24", 0)
	younger := cidrPool("a-younger", "198.51.100.128/25", 1)
	self := Pool{Name: "self", Ranges: []Range{CIDRRange(netip.MustParsePrefix("192.0.2.0/24"), true),
		{From: netip.MustParseAddr("192.0.2.10"), To: netip.MustParseAddr("192.0.2.20")}}}
	clean := cidrPool("clean", "203.0.113.0/24", 2)
	clean.Selects = func(map[string]string) bool { return false }
	as, st := Allocate([]Pool{younger, older, self, clean}, []Service{svc("a", 1)})
	requireAddrs(t, as, map[string][]string{"a": {"198.51.100.0"}})
	byPool := map[string]PoolStatus{}
	for _, s := range st {
		byPool[s.Name] = s
	}
	for name, conflict := range map[string]bool{"a-younger": true, "b-older": false, "self": true, "clean": false} {
		if s := byPool[name]; s.Conflict != conflict || conflict != (s.Message != "") {
			t.Errorf("pool %s: %+v, want conflict %v with a message when in conflict", name, s, conflict)
		}
	}
	if !strings.Contains(byPool["a-younger"].Message, "b-older") {
		t.Errorf("the younger pool's message %q does not name the older", byPool["a-younger"].Message)
	}
}

// The result depends on the inputs, not on their order.
func TestOrderDoesNotMatter(t *testing.T) {
	pools := []Pool{cidrPool("p1", "198.51.100.0/29", 0), cidrPool("p2", "192.0.2.0/30", 1)}
	var svcs []Service
	for i := range 14 {
		s := svc(string(rune('a'+i)), i%5) // some share a creation time
		if i%3 == 0 {
			s.SharingKey, s.Ports = "k", []Port{{uint16(1000 + i), "TCP"}}
		}
		svcs = append(svcs, s)
	}
	want, wantSt := Allocate(pools, svcs)
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		r.Shuffle(len(svcs), func(i, j int) { svcs[i], svcs[j] = svcs[j], svcs[i] })
		r.Shuffle(len(pools), func(i, j int) { pools[i], pools[j] = pools[j], pools[i] })
		got, gotSt := Allocate(pools, svcs)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotSt, wantSt) {
			t.Fatalf("another order gave another result:\n%+v\nwant\n%+v", got, want)
		}
	}
}
