package proxy

import (
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/cilium-go/cilium/pkg/fqdn"
)

// rr is one answer record: an A record when addr is set, else a CNAME to
// target.
type rr struct {
	owner, target string
	addr          string
	ttl           uint32
}

// answerOf builds the answer to an A query for name from records, in
// their order.
func answerOf(t *testing.T, name string, records ...rr) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, Response: true})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.StartQuestions())
	must(b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}))
	must(b.StartAnswers())
	for _, r := range records {
		h := dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(r.owner), Class: dnsmessage.ClassINET, TTL: r.ttl}
		if r.addr != "" {
			must(b.AResource(h, dnsmessage.AResource{A: netip.MustParseAddr(r.addr).As4()}))
		} else {
			must(b.CNAMEResource(h, dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(r.target)}))
		}
	}
	out, err := b.Finish()
	must(err)
	return out
}

// An answer teaches the name asked the addresses its CNAME chain ends
// in, for as long as every record of the chain holds (Cilium's TTL), and
// each target the same addresses, for as long as the records from it on
// hold; records off the chain teach nothing, whatever their order.
func TestAnswerRecordFollowsCNAMEChains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records []rr
		ips     []string
		ttl     uint32
		cnames  []string
		targets []fqdn.Target
	}{
		{name: "no chain", records: []rr{{owner: "a.test.", addr: "192.0.2.1", ttl: 60}, {owner: "a.test.", addr: "192.0.2.2", ttl: 30}},
			ips: []string{"192.0.2.1", "192.0.2.2"}, ttl: 30},
		{name: "a to b to c", records: []rr{
			{owner: "a.test.", target: "b.test.", ttl: 300},
			{owner: "b.test.", target: "c.test.", ttl: 40},
			{owner: "c.test.", addr: "192.0.2.3", ttl: 120},
			{owner: "c.test.", addr: "192.0.2.4", ttl: 90},
		}, ips: []string{"192.0.2.3", "192.0.2.4"}, ttl: 40, cnames: []string{"b.test.", "c.test."},
			targets: []fqdn.Target{{Name: "b.test.", TTL: 40}, {Name: "c.test.", TTL: 90}}},
		{name: "out of order, with a record off the chain", records: []rr{
			{owner: "c.test.", addr: "192.0.2.3", ttl: 120},
			{owner: "elsewhere.test.", addr: "192.0.2.9", ttl: 5},
			{owner: "b.test.", target: "c.test.", ttl: 200},
			{owner: "a.test.", target: "b.test.", ttl: 300},
		}, ips: []string{"192.0.2.3"}, ttl: 120, cnames: []string{"b.test.", "c.test."},
			targets: []fqdn.Target{{Name: "b.test.", TTL: 120}, {Name: "c.test.", TTL: 120}}},
		{name: "a loop", records: []rr{
			{owner: "a.test.", target: "b.test.", ttl: 300},
			{owner: "b.test.", target: "a.test.", ttl: 300},
		}, cnames: []string{"b.test."}},
		{name: "a chain to nothing", records: []rr{{owner: "a.test.", target: "b.test.", ttl: 300}}, cnames: []string{"b.test."}},
		// A name with both a CNAME and addresses is no valid answer: the
		// addresses are the name's, and nothing after it learns them.
		{name: "addresses mid-chain", records: []rr{
			{owner: "a.test.", target: "b.test.", ttl: 300},
			{owner: "b.test.", addr: "192.0.2.5", ttl: 60},
			{owner: "b.test.", target: "c.test.", ttl: 300},
			{owner: "c.test.", addr: "192.0.2.6", ttl: 10},
		}, ips: []string{"192.0.2.5", "192.0.2.6"}, ttl: 10, cnames: []string{"b.test.", "c.test."},
			targets: []fqdn.Target{{Name: "b.test.", TTL: 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, targets := answerRecord(answerOf(t, "a.test.", tc.records...), "a.test.", []string{"A"})
			var ips []string
			for _, ip := range rec.IPs {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(ips, tc.ips) || rec.TTL != tc.ttl || !slices.Equal(rec.CNAMEs, tc.cnames) {
				t.Errorf("addresses %v TTL %d CNAMEs %v, want %v %d %v", ips, rec.TTL, rec.CNAMEs, tc.ips, tc.ttl, tc.cnames)
			}
			if !slices.Equal(targets, tc.targets) {
				t.Errorf("targets %+v, want %+v", targets, tc.targets)
			}
		})
	}
}

// Names are compared as DNS compares them: a target in capitals is the
// same name, learned in lower case.
func TestAnswerRecordCase(t *testing.T) {
	rec, targets := answerRecord(answerOf(t, "A.test.",
		rr{owner: "A.TEST.", target: "B.Test.", ttl: 30}, rr{owner: "b.test.", addr: "192.0.2.1", ttl: 60}), "a.test.", nil)
	if len(rec.IPs) != 1 || rec.TTL != 30 || !slices.Equal(targets, []fqdn.Target{{Name: "b.test.", TTL: 60}}) {
		t.Fatalf("addresses %v TTL %d targets %+v", rec.IPs, rec.TTL, targets)
	}
}
