package proxy_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/tproxy"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/proxy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

const (
	dnsProxyPort         = 10053
	httpProxyPort        = 10080
	httpIngressProxyPort = 10081
)

// zone is a small authoritative server's data: names to addresses, and
// names that are CNAMEs of others.
type zone struct {
	a     map[string][]netip.Addr
	cname map[string]string
	ttl   map[string]uint32 // of a name's A records, 60 for those not here
	mu    *sync.Mutex       // if the test changes the maps while served
}

func (z zone) answer(q []byte) []byte {
	if z.mu != nil {
		z.mu.Lock()
		defer z.mu.Unlock()
	}
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qu, err := p.Question()
	if err != nil {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	b.StartQuestions()
	b.Question(qu)
	b.StartAnswers()
	name := qu.Name.String()
	rcode := dnsmessage.RCodeNameError
	for range 4 {
		if t, ok := z.cname[name]; ok {
			b.CNAMEResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Class: dnsmessage.ClassINET, TTL: 300},
				dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(t)})
			name = t
			continue
		}
		ttl, ok := z.ttl[name]
		if !ok {
			ttl = 60
		}
		for _, a := range z.a[name] {
			b.AResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Class: dnsmessage.ClassINET, TTL: ttl},
				dnsmessage.AResource{A: a.As4()})
			rcode = dnsmessage.RCodeSuccess
		}
		break
	}
	out, _ := b.Finish()
	out[3] = out[3]&0xf0 | byte(rcode) // the builder wrote the header first
	return out
}

// serveDNS answers from z on UDP port 53 of the pod.
func serveDNS(t *testing.T, pod *dptest.Pod, z zone) {
	t.Helper()
	var pc net.PacketConn
	err := netnamespace.Do(pod.NS, func() (err error) {
		pc, err = net.ListenPacket("udp4", netip.AddrPortFrom(pod.IP, 53).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if a := z.answer(buf[:n]); a != nil {
				pc.WriteTo(a, from)
			}
		}
	}()
}

// lookup asks the server at server for name from the pod and returns the
// answer's code and addresses.
func lookup(pod *dptest.Pod, server netip.Addr, name string) (dnsmessage.RCode, []netip.Addr, error) {
	var c net.Conn
	err := netnamespace.Do(pod.NS, func() (err error) {
		c, err = net.Dial("udp4", netip.AddrPortFrom(server, 53).String())
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	c.SetDeadline(time.Now().Add(dptest.ReplyWait))
	if _, err := c.Write(q); err != nil {
		return 0, nil, err
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		return 0, nil, err
	}
	msg := new(dnsmessage.Message)
	if err := msg.Unpack(buf[:n]); err != nil {
		return 0, nil, err
	}
	if msg.ID != 4242 || len(msg.Questions) != 1 || msg.Questions[0].Name.String() != name {
		return 0, nil, errors.New("the answer is not the query's")
	}
	var ips []netip.Addr
	for _, a := range msg.Answers {
		if r, ok := a.Body.(*dnsmessage.AResource); ok {
			ips = append(ips, netip.AddrFrom4(r.A))
		}
	}
	return msg.RCode, ips, nil
}

type recorder struct {
	mu      sync.Mutex
	records []accesslog.Record
	learned []fqdn.Lookup
	refuse  bool // learn fails, as when the agent does not confirm in time
}

func (r *recorder) record(rec accesslog.Record) {
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
}

func (r *recorder) learn(_ context.Context, l fqdn.Lookup) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.learned = append(r.learned, l)
	if r.refuse {
		return errors.New("not confirmed")
	}
	return nil
}

func (r *recorder) snapshot() ([]accesslog.Record, []fqdn.Lookup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records), slices.Clone(r.learned)
}

// startProxy runs a proxy in node n's namespace for the cluster's pods.
func startProxy(t *testing.T, c *dptest.Cluster, n *dptest.Node, rec *recorder) *proxy.Proxy {
	t.Helper()
	ids := map[netip.Addr]identity.NumericIdentity{}
	for _, p := range c.Pods() {
		ids[p.IP] = p.Identity
	}
	p := proxy.New(proxy.Config{DNSPort: dnsProxyPort, HTTPPort: httpProxyPort, HTTPIngressPort: httpIngressProxyPort, Sockets: tproxy.Sockets{NetNS: n.NS},
		IdentityOf: func(a netip.Addr) identity.NumericIdentity {
			if id, ok := ids[a]; ok {
				return id
			}
			return identity.World
		},
		Learn: rec.learn, Record: rec.record, UpstreamTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return p
}

func newCluster(t *testing.T, o dptest.Options) *dptest.Cluster {
	t.Helper()
	testenv.Privileged(t)
	c, err := dptest.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("remove cluster: %v", err)
		}
	})
	return c
}

// A pod's DNS lookups go through the DNS proxy on its node: the rules'
// names are answered by the server, others REFUSED by the proxy in the
// server's name; the proxy learns the allowed answers' addresses
// (following CNAMEs) and records each query and answer.
func TestPrivilegedDNSProxy(t *testing.T) {
	c := newCluster(t, dptest.Options{Mode: spec.Tunnel, PolicyEgress: true})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	client, server := n1.Pods[0], n2.Pods[0]
	serveDNS(t, server, zone{
		a: map[string][]netip.Addr{
			"api.allowed.test.":      {netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")},
			"other.denied.test.":     {netip.MustParseAddr("192.0.2.10")},
			"target.elsewhere.test.": {netip.MustParseAddr("192.0.2.20")},
			"edge.allowed.test.":     {netip.MustParseAddr("192.0.2.30")},
		},
		cname: map[string]string{"alias.allowed.test.": "target.elsewhere.test.", "www.allowed.test.": "edge.allowed.test."},
	})
	rec := &recorder{}
	px := startProxy(t, c, n1, rec)
	rules := &policy.L7Rules{Parser: policy.ParserDNS, DNS: []policy.DNSRule{{MatchPattern: "*.allowed.test"}}}
	err := px.SetPolicy(proxy.Policy{Revision: 1, Endpoints: []proxy.Endpoint{{ID: client.ID, Identity: client.Identity, IPv4: client.IP,
		Ports: []policy.L7Port{{Direction: spec.Egress, Protocol: spec.ProtoUDP, Port: 53,
			Allows: []policy.L7Allow{{Identities: []identity.NumericIdentity{server.Identity}, L7: rules}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := n1.DP.Maps().SetPolicy(client.ID, []spec.PolicyEntry{
		{Direction: spec.Egress, Identity: server.Identity, Protocol: spec.ProtoUDP, Port: 53, ProxyPort: dnsProxyPort},
	}); err != nil {
		t.Fatal(err)
	}

	rcode, ips, err := lookup(client, server.IP, "api.allowed.test.")
	if err != nil || rcode != dnsmessage.RCodeSuccess || len(ips) != 2 {
		t.Fatalf("allowed name: %v %v %v", rcode, ips, err)
	}
	rcode, ips, err = lookup(client, server.IP, "other.denied.test.")
	if err != nil || rcode != dnsmessage.RCodeRefused || len(ips) != 0 {
		t.Fatalf("denied name: %v %v %v, want REFUSED", rcode, ips, err)
	}
	rcode, ips, err = lookup(client, server.IP, "alias.allowed.test.")
	if err != nil || rcode != dnsmessage.RCodeSuccess || len(ips) != 1 {
		t.Fatalf("allowed CNAME: %v %v %v", rcode, ips, err)
	}
	rcode, ips, err = lookup(client, server.IP, "www.allowed.test.")
	if err != nil || rcode != dnsmessage.RCodeSuccess || len(ips) != 1 {
		t.Fatalf("allowed CNAME to an allowed name: %v %v %v", rcode, ips, err)
	}

	records, learned := rec.snapshot()
	want := []fqdn.Lookup{
		{Endpoint: client.ID, Name: "api.allowed.test.", IPs: []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")}, TTL: 60},
		// The target is no name the rules let the client ask for: not
		// learned.
		{Endpoint: client.ID, Name: "alias.allowed.test.", IPs: []netip.Addr{netip.MustParseAddr("192.0.2.20")}, TTL: 60},
		{Endpoint: client.ID, Name: "www.allowed.test.", IPs: []netip.Addr{netip.MustParseAddr("192.0.2.30")}, TTL: 60,
			Targets: []fqdn.Target{{Name: "edge.allowed.test.", TTL: 60}}},
	}
	if len(learned) != len(want) {
		t.Fatalf("learned %+v, want %+v", learned, want)
	}
	for i := range want {
		if learned[i].Endpoint != want[i].Endpoint || learned[i].Name != want[i].Name || !slices.Equal(learned[i].IPs, want[i].IPs) || learned[i].TTL != want[i].TTL ||
			!slices.Equal(learned[i].Targets, want[i].Targets) {
			t.Fatalf("learned %+v, want %+v", learned[i], want[i])
		}
	}
	var verdicts []string
	for _, r := range records {
		verdicts = append(verdicts, r.DNS.Query+" "+map[accesslog.RecordType]string{accesslog.Request: "request", accesslog.Response: "response"}[r.Type]+" "+
			map[accesslog.Verdict]string{accesslog.Forwarded: "forwarded", accesslog.Denied: "denied", accesslog.Errored: "error"}[r.Verdict])
	}
	wantVerdicts := []string{"api.allowed.test. request forwarded", "api.allowed.test. response forwarded",
		"other.denied.test. request denied",
		"alias.allowed.test. request forwarded", "alias.allowed.test. response forwarded",
		"www.allowed.test. request forwarded", "www.allowed.test. response forwarded"}
	if !slices.Equal(verdicts, wantVerdicts) {
		t.Fatalf("records %q, want %q", verdicts, wantVerdicts)
	}
	if r := records[1]; r.Src != netip.AddrPortFrom(server.IP, 53) || r.DstIdentity != client.Identity || r.DstEndpoint != client.ID ||
		r.SrcEndpoint != 0 || r.DNS.TTL != 60 {
		t.Fatalf("response record %+v", r)
	}
}

// The proxy tells the agent of an answer once in half its TTL: the same
// answer again within it is not told, new addresses and a new policy
// (of a new endpoint, or of an agent that restarted) are, and so is
// every answer with a TTL of 0 or that the agent did not confirm.
func TestPrivilegedDNSProxyTellsAgentOncePerTTL(t *testing.T) {
	c := newCluster(t, dptest.Options{Mode: spec.Native, PolicyEgress: true})
	n1 := c.Nodes[0]
	client, server := n1.Pods[0], n1.Pods[1]
	z := zone{a: map[string][]netip.Addr{
		"api.allowed.test.":  {netip.MustParseAddr("192.0.2.10")},
		"ttl0.allowed.test.": {netip.MustParseAddr("192.0.2.20")},
	}, ttl: map[string]uint32{"ttl0.allowed.test.": 0}, mu: &sync.Mutex{}}
	serveDNS(t, server, z)
	rec := &recorder{}
	px := startProxy(t, c, n1, rec)
	setPolicy := func(revision uint64) {
		t.Helper()
		rules := &policy.L7Rules{Parser: policy.ParserDNS, DNS: []policy.DNSRule{{MatchPattern: "*.allowed.test"}}}
		must(t, px.SetPolicy(proxy.Policy{Revision: revision, Endpoints: []proxy.Endpoint{{ID: client.ID, Identity: client.Identity, IPv4: client.IP,
			Ports: []policy.L7Port{{Direction: spec.Egress, Protocol: spec.ProtoUDP, Port: 53,
				Allows: []policy.L7Allow{{Identities: []identity.NumericIdentity{server.Identity}, L7: rules}}}}}}}))
	}
	setPolicy(1)
	must(t, n1.DP.Maps().SetPolicy(client.ID, []spec.PolicyEntry{
		{Direction: spec.Egress, Identity: server.Identity, Protocol: spec.ProtoUDP, Port: 53, ProxyPort: dnsProxyPort},
	}))
	told := 0
	expect := func(name string, tells bool) {
		t.Helper()
		z.mu.Lock()
		want := len(z.a[name])
		z.mu.Unlock()
		if rcode, ips, err := lookup(client, server.IP, name); err != nil || rcode != dnsmessage.RCodeSuccess || len(ips) != want {
			t.Fatalf("%s: %v %v %v", name, rcode, ips, err)
		}
		_, learned := rec.snapshot()
		if tells {
			told++
		}
		if len(learned) != told {
			t.Fatalf("after a lookup of %s the agent was told of %d answers, want %d: %+v", name, len(learned), told, learned)
		}
	}
	expect("api.allowed.test.", true)
	expect("api.allowed.test.", false)
	expect("ttl0.allowed.test.", true)
	expect("ttl0.allowed.test.", true)
	z.mu.Lock()
	z.a["api.allowed.test."] = append(z.a["api.allowed.test."], netip.MustParseAddr("192.0.2.11"))
	z.mu.Unlock()
	expect("api.allowed.test.", true)
	if _, learned := rec.snapshot(); len(learned[told-1].IPs) != 2 {
		t.Fatalf("the new addresses were not told: %+v", learned[told-1])
	}
	expect("api.allowed.test.", false)
	setPolicy(2)
	expect("api.allowed.test.", true)
	expect("api.allowed.test.", false)
	rec.mu.Lock()
	rec.refuse = true
	rec.mu.Unlock()
	setPolicy(3)
	expect("api.allowed.test.", true)
	expect("api.allowed.test.", true)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
