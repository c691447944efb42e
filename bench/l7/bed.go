package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync/atomic"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/l7"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/proxy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

const (
	httpPort      = 8080
	dnsPort       = 53
	httpProxyPort = 10080
	dnsProxyPort  = 10053
)

// path is how the client pod's allow of the servers' ports is written in
// its node's policy map: the entry alone (layer 4), or the same entry
// with the proxy's port, which sends the allowed connections to node 1's
// proxy, or (HTTP only) with the relay's port (relay).
type path int

const (
	pathL4 path = iota
	pathProxy
	pathRelay
)

func (p path) String() string {
	switch p {
	case pathProxy:
		return "proxy"
	case pathRelay:
		return "relay"
	}
	return "L4 only"
}

// httpRules are the client's HTTP rules: a few, as a service's policy
// has, the bench's requests matching the third.
var httpRules = &policy.L7Rules{Parser: policy.ParserHTTP, HTTP: []l7.HTTPRule{
	{Method: "GET", Path: "/healthz"},
	{Method: "POST", Path: "/api/v1/orders", Headers: []string{"X-Tenant: bench"}},
	{Method: "GET", Path: "/api/v1/items/[0-9]+"},
	{Method: "PUT", Path: "/api/v1/items/[0-9]+", Headers: []string{"X-Tenant: bench"}},
}}

// dnsRules are the client's DNS rules; the bench's name matches the
// pattern.
var dnsRules = &policy.L7Rules{Parser: policy.ParserDNS, DNS: []policy.DNSRule{
	{MatchName: "kubernetes.default.svc.cluster.local"},
	{MatchPattern: "*.bench.test"},
	{MatchPattern: "*.example.com"},
}}

// bed is the cluster the HTTP and DNS parts run on: two nodes, egress
// policy on every pod, the client pod on node 1 and a server pod on each
// node (HTTP and DNS), node 1's layer-7 proxy in a process of its own in
// node 1's namespace (proxyproc.go), and the agent's end of its sockets.
type bed struct {
	c       *dptest.Cluster
	client  *dptest.Pod
	servers []*server
	agent   *agentSide
	proxy   *proxyProc
	closers []io.Closer
	zone    *zone // the DNS servers'
	names   int   // the names lookups asked for so far (benchName)
}

// server is a server pod: where it is from the client, and its servers.
type server struct {
	where string
	pod   *dptest.Pod
	http  *httpServer
}

func newBed(mode spec.RoutingMode, profile string) (b *bed, err error) {
	c, err := dptest.New(dptest.Options{Mode: mode, PolicyEgress: true})
	if err != nil {
		return nil, err
	}
	n1, n2 := c.Nodes[0], c.Nodes[1]
	b = &bed{c: c, client: n1.Pods[0], servers: []*server{
		{where: "same node", pod: n1.Pods[1]},
		{where: "other node", pod: n2.Pods[0]},
	}, zone: benchZone()}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.close())
		}
	}()
	for _, s := range b.servers {
		if s.http, err = serveHTTP(s.pod.NS, s.pod.IP, httpPort); err != nil {
			return b, err
		}
		b.closers = append(b.closers, s.http)
		dns, err := serveDNS(s.pod.NS, s.pod.IP, dnsPort, b.zone)
		if err != nil {
			return b, err
		}
		b.closers = append(b.closers, dns)
	}
	if b.agent, err = newAgentSide(b.proxyPolicy()); err != nil {
		return b, err
	}
	b.closers = append(b.closers, b.agent)
	if b.proxy, err = startProxy(proxyConfig{NetNS: n1.NS, BPFRoot: n1.BPFFSDir, Dir: b.agent.dir, Profile: profile}); err != nil {
		b.proxy = nil
		return b, err
	}
	return b, b.setPath(pathL4)
}

// serverIdentities are the server pods' identities, which the client's
// allows name.
func (b *bed) serverIdentities() []identity.NumericIdentity {
	var ids []identity.NumericIdentity
	for _, s := range b.servers {
		ids = append(ids, s.pod.Identity)
	}
	return ids
}

// proxyPolicy is the proxy's policy for the client: its HTTP and DNS
// rules towards the servers.
func (b *bed) proxyPolicy() proxy.Policy {
	ids := b.serverIdentities()
	return proxy.Policy{Revision: 1, Endpoints: []proxy.Endpoint{{ID: b.client.ID, Identity: b.client.Identity, IPv4: b.client.IP,
		Ports: []policy.L7Port{
			{Direction: spec.Egress, Protocol: spec.ProtoTCP, Port: httpPort, Allows: []policy.L7Allow{{Identities: ids, L7: httpRules}}},
			{Direction: spec.Egress, Protocol: spec.ProtoUDP, Port: dnsPort, Allows: []policy.L7Allow{{Identities: ids, L7: dnsRules}}},
		}}}}
}

// setPath writes the client's egress entries to the servers' HTTP and
// DNS ports, with the proxy's ports or without.
func (b *bed) setPath(p path) error {
	var entries []spec.PolicyEntry
	for _, id := range b.serverIdentities() {
		e := []spec.PolicyEntry{
			{Direction: spec.Egress, Identity: id, Protocol: spec.ProtoTCP, Port: httpPort},
			{Direction: spec.Egress, Identity: id, Protocol: spec.ProtoUDP, Port: dnsPort},
		}
		switch p {
		case pathProxy:
			e[0].ProxyPort, e[1].ProxyPort = httpProxyPort, dnsProxyPort
		case pathRelay:
			e[0].ProxyPort = relayPort
		}
		entries = append(entries, e...)
	}
	if err := b.c.Nodes[0].DP.Maps().SetPolicy(b.client.ID, entries); err != nil {
		return fmt.Errorf("client's policy (%s): %w", p, err)
	}
	// A flow keeps the verdict of its first packet in its conntrack
	// entry, the proxy's port with it: a lookup of the next run whose
	// socket gets a port of the last run's would take the last run's
	// path. Every run starts with none of the client's entries.
	for _, n := range b.c.Nodes {
		if _, err := n.DP.Maps().FlushConntrack(func(a netip.Addr) bool { return a == b.client.IP }); err != nil {
			return fmt.Errorf("flush %s's conntrack: %w", n.Name, err)
		}
	}
	return nil
}

func (b *bed) close() error {
	var errs []error
	if b.proxy != nil {
		errs = append(errs, b.proxy.close())
		b.proxy = nil
	}
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i].Close())
	}
	b.closers = nil
	return errors.Join(append(errs, b.c.Close())...)
}

// seen counts the requests the proxy records, by protocol, and those it
// did not forward: what proves that a run went through the proxy, or
// not. The access log's own cost (serializing, sending to Hubble) is not
// in it.
type seen struct {
	http, dns, notForwarded atomic.Int64
}

func (s *seen) record(r accesslog.Record) {
	if r.Type != accesslog.Request {
		return
	}
	if r.Verdict != accesslog.Forwarded {
		s.notForwarded.Add(1)
	}
	switch {
	case r.HTTP != nil:
		s.http.Add(1)
	case r.DNS != nil:
		s.dns.Add(1)
	}
}

// counts is a snapshot of seen.
type counts struct{ HTTP, DNS, NotForwarded int64 }

func (s *seen) snapshot() counts {
	return counts{s.http.Load(), s.dns.Load(), s.notForwarded.Load()}
}

// counts asks the proxy what it has recorded so far.
func (b *bed) counts() (proxyReply, error) { return b.proxy.ask(askCounts) }

// checkSeen says whether the proxy saw what a run of path p sent:
// every request through the proxy, none without it.
func checkSeen(p path, before, after counts, httpSent, dnsSent int64) error {
	want := counts{}
	if p == pathProxy {
		want = counts{HTTP: httpSent, DNS: dnsSent}
	}
	got := counts{after.HTTP - before.HTTP, after.DNS - before.DNS, after.NotForwarded - before.NotForwarded}
	if got != want {
		return fmt.Errorf("%s: the proxy saw %d HTTP requests and %d DNS queries (%d not forwarded), want %d and %d (none not forwarded)",
			p, got.HTTP, got.DNS, got.NotForwarded, want.HTTP, want.DNS)
	}
	return nil
}

// checkRelayed says whether the relay took connections on the relay path
// and none on the others.
func checkRelayed(p path, before, after proxyReply) error {
	if took := after.Relayed - before.Relayed; (took > 0) != (p == pathRelay) {
		return fmt.Errorf("%s: the relay took %d connections", p, took)
	}
	return nil
}

// nextName is the name of the next run's lookups, asked in no run before.
func (b *bed) nextName() string {
	b.names++
	return benchName(b.names)
}
