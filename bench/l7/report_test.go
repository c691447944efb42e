package main

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

func µs(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Microsecond
	}
	return out
}

// The added latency is paired by repetition: a drift common to both
// paths cancels, and the interval of the mean decides the verdict.
func TestAddedOf(t *testing.T) {
	// Differences 100 110 90 105 95 µs on a base that drifts by half.
	without := µs(50, 75, 40, 60, 30)
	with := µs(150, 185, 130, 165, 125)
	a := addedOf(with, without)
	if a.n != 5 || a.median != 100*time.Microsecond || a.min != 90*time.Microsecond || a.max != 110*time.Microsecond ||
		a.mean != 100*time.Microsecond {
		t.Fatalf("got %+v", a)
	}
	// t(4) 2.776 * sd 7.9057 / sqrt(5) = 9.815 µs either side.
	if lo, hi := a.lo.Microseconds(), a.hi.Microseconds(); lo != 90 || hi != 109 {
		t.Errorf("interval [%d, %d] µs, want [90, 109]", lo, hi)
	}
	for _, c := range []struct {
		target time.Duration
		want   string
	}{
		{150 * time.Microsecond, "met"},
		{80 * time.Microsecond, "missed"},
		{100 * time.Microsecond, "undecided"},
	} {
		if got := a.judge(c.target); !strings.HasPrefix(got, c.want) {
			t.Errorf("against %s: %q, want %s", c.target, got, c.want)
		}
	}
	if got := addedOf(µs(200), µs(50)).judge(time.Millisecond); !strings.HasPrefix(got, "undecided: one repetition") {
		t.Errorf("one repetition: %q", got)
	}
}

func TestLatencyOf(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- { // unsorted
		lat = append(lat, time.Duration(i)*time.Microsecond)
	}
	l := latencyOf(lat)
	if l.p50 != 50*time.Microsecond || l.p99 != 99*time.Microsecond || l.n != 100 {
		t.Errorf("got %+v, want p50 50µs p99 99µs of 100", l)
	}
	if lat[0] != 100*time.Microsecond {
		t.Error("latencyOf sorted its argument")
	}
}

// The proxied path must have every request recorded and forwarded, the
// L4 path none.
func TestCheckSeen(t *testing.T) {
	before := counts{HTTP: 10, DNS: 5}
	for _, c := range []struct {
		name  string
		p     path
		after counts
		ok    bool
	}{
		{"proxy, all seen", pathProxy, counts{HTTP: 110, DNS: 55}, true},
		{"proxy, a request missing", pathProxy, counts{HTTP: 109, DNS: 55}, false},
		{"proxy, a lookup missing", pathProxy, counts{HTTP: 110, DNS: 54}, false},
		{"proxy, one denied", pathProxy, counts{HTTP: 110, DNS: 55, NotForwarded: 1}, false},
		{"L4, none seen", pathL4, before, true},
		{"L4, a lookup seen", pathL4, counts{HTTP: 10, DNS: 6}, false},
	} {
		err := checkSeen(c.p, before, c.after, 100, 50)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// The bench's DNS server answers its resolver's query with the zone's
// records, which the resolver's check accepts; a name out of the zone
// gets NXDOMAIN and an answer to another query is refused.
func TestZoneAnswersResolver(t *testing.T) {
	z := benchZone()
	r := newResolver("", netip.MustParseAddr("10.0.0.1"), benchName(1), len(benchAddrs))
	r.id = 7
	binary.BigEndian.PutUint16(r.query, r.id)
	answer := z.answer(r.query)
	if err := r.check(answer); err != nil {
		t.Fatalf("answer to the bench's query: %v", err)
	}
	var msg dnsmessage.Message
	if err := msg.Unpack(answer); err != nil || !msg.Authoritative || len(msg.Answers) != 2 || msg.Answers[0].Header.TTL != benchTTL {
		t.Fatalf("answer %+v: %v", msg, err)
	}
	r.id = 8
	if err := r.check(answer); err == nil {
		t.Error("an answer to query 7 passed as the answer to query 8")
	}
	z.ttl.Store(0)
	if err := msg.Unpack(z.answer(r.query)); err != nil || len(msg.Answers) != 2 || msg.Answers[0].Header.TTL != 0 {
		t.Errorf("answer with the TTL set to 0: %+v: %v", msg, err)
	}

	other := newResolver("", netip.MustParseAddr("10.0.0.1"), "missing.example.test.", 0)
	other.id = 9
	binary.BigEndian.PutUint16(other.query, other.id)
	if err := msg.Unpack(z.answer(other.query)); err != nil || msg.RCode != dnsmessage.RCodeNameError {
		t.Errorf("a name out of the zone: %v %v, want NXDOMAIN", msg.RCode, err)
	}
	if z.answer([]byte{1, 2, 3}) != nil || z.answer(answer) != nil {
		t.Error("the server answered what is no query")
	}
	if !dnsRules.DNS[1].Matches(benchName(1)) || !dnsRules.DNS[1].Matches(benchName(12)) {
		t.Error("the client's DNS rules do not allow the bench's names")
	}
}

// The memory part's selectors are distinct, each matches the name its
// endpoint learned and no other's, and the learned IPs are distinct.
func TestFQDNSelectors(t *testing.T) {
	sels := fqdnSelectors(memEndpoints, selectorsPerEp)
	if len(sels) != 1000 {
		t.Fatalf("%d selectors, want 1000", len(sels))
	}
	keys := map[string]bool{}
	for i, s := range sels {
		key := s.rule.MatchName + "|" + s.rule.MatchPattern
		if keys[key] {
			t.Fatalf("selector %d (%s) twice", i, key)
		}
		keys[key] = true
		if !s.rule.Matches(s.name) {
			t.Errorf("selector %+v does not match its name", s)
		}
		if o := sels[(i+1)%len(sels)]; s.rule.Matches(o.name) {
			t.Errorf("selector %+v matches %s too", s, o.name)
		}
	}
	ips := map[netip.Addr]bool{}
	for _, l := range lookups(sels, time.Now()) {
		for _, a := range l.IPs {
			if ips[a] || !netip.MustParsePrefix("198.18.0.0/15").Contains(a) {
				t.Fatalf("address %s twice or outside 198.18.0.0/15", a)
			}
			ips[a] = true
		}
	}
	if len(ips) != 10000 {
		t.Errorf("%d learned IPs, want 10000", len(ips))
	}
}

// The engine the memory part measures selects the learned IPs: each
// endpoint gets an entry for each address its selectors' names have, on
// its rule's port.
func TestBuildEngineSelects(t *testing.T) {
	sels := fqdnSelectors(memEndpoints, 2)
	ls := lookups(sels, time.Now())
	e := buildEngine(sels, true, func() map[netip.Addr][]string { return buildCache(ls).Names() })
	for ep := range memEndpoints {
		n := 0
		for ent := range e.Entries(epID(ep)) {
			if ent.Direction == spec.Egress && ent.Port == 443 && ent.Identity != 0 {
				n++
			}
		}
		if n != 2*ipsPerName {
			t.Fatalf("endpoint %d: %d entries to port 443, want %d", ep, n, 2*ipsPerName)
		}
	}
	if _, err := buildProxy(sels, true); err != nil {
		t.Fatal(err)
	}
}

func TestRetained(t *testing.T) {
	n, err := retained(func() (any, error) { return make([]byte, 4<<20), nil })
	// Give or take what else the collections freed or the runtime kept.
	if err != nil || n < 4<<20-64<<10 || n > 4<<20+64<<10 {
		t.Errorf("a 4 MiB slice retains %d bytes (%v)", n, err)
	}
}

// The reports print each path's figures and judge the targets.
func TestReports(t *testing.T) {
	run := func(rate float64, p50, p99 int) httpRun {
		return httpRun{rate: rate, lat: latency{p50: time.Duration(p50) * time.Microsecond, p99: time.Duration(p99) * time.Microsecond, n: 100}}
	}
	places := []httpPlace{{where: "same node",
		l4:    []httpRun{run(10000, 50, 150), run(12000, 55, 160), run(11000, 52, 155)},
		proxy: []httpRun{run(6000, 150, 400), run(7300, 160, 420), run(6500, 150, 410)},
		relay: []httpRun{run(8000, 120, 300), run(9600, 130, 320), run(8800, 125, 310)},
		cpu:   µs(60, 62, 61)}}
	var b strings.Builder
	httpReport(&b, places, 8, time.Second, time.Second)
	for _, want := range []string{
		"same node   L4 only  11000 [10000, 12000]",
		"same node: rate proxy/L4 0.600",
		"target >= 0.50: met",
		"same node: p50 added 100µs (median; range 98µs to 105µs; mean 101µs [",
		"target <= 150µs: met",
		"the proxy process's CPU per request 61µs [60µs, 62µs]",
		"same node   relay    8800 [8000, 9600]",
		"same node: the relay's floor: rate relay/L4 0.800",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("HTTP report lacks %q:\n%s", want, b.String())
		}
	}

	lat := func(p99 ...int) []latency {
		var out []latency
		for _, x := range p99 {
			out = append(out, latency{p50: 30 * time.Microsecond, p99: time.Duration(x) * time.Microsecond, n: 1000})
		}
		return out
	}
	dp := dnsPlace{where: "other node", direct: lat(100, 120, 110), cpu: µs(100, 100, 100)}
	dp.proxied = [learnWays][]latency{lat(400, 420, 410), lat(2100, 2200, 2150), lat(900, 1300, 600), lat(900, 1300, 600)}
	b.Reset()
	dnsReport(&b, []dnsPlace{dp}, time.Second)
	for _, want := range []string{
		"other node: p99 added (Learn no-op) 300µs",
		"target <= 1ms: met",
		"other node: p99 added (Learn to agent, TTL 60s) 2.04ms",
		"target <= 1ms: missed",
		"target <= 1ms: undecided",
		"3000\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("DNS report lacks %q:\n%s", want, b.String())
		}
	}

	b.Reset()
	memoryReport(&b, []memFigure{{what: "cache", items: 1000, per: "IP", base: []int64{1000, 1000}, all: []int64{251000, 253000}}}, 0)
	if want := "251 bytes per IP [250, 252]"; !strings.Contains(b.String(), want) {
		t.Errorf("memory report lacks %q:\n%s", want, b.String())
	}
}
