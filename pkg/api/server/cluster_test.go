package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cilium-go/cilium/pkg/api/models"
)

type fakeIPCache struct {
	entries []models.IPCacheEntry
	err     error
}

func (f fakeIPCache) ListIPCache() ([]models.IPCacheEntry, error) { return f.entries, f.err }

type fakeNodes []models.Node

func (f fakeNodes) ListNodes() ([]models.Node, error) { return f, nil }

func TestIPCacheAndNodes(t *testing.T) {
	entries := []models.IPCacheEntry{{Prefix: "10.0.2.5/32", Identity: 4242, TunnelEndpoint: "192.168.1.2"}}
	nodes := []models.Node{{Name: "n1", IPv4: "192.168.1.1", PodCIDR: "10.0.1.0/24", Local: true}}
	for _, tc := range []struct {
		name    string
		ipcache IPCacheLister
		nodes   NodeLister
		path    string
		code    int
		want    string
	}{
		{"no datapath", nil, nil, "/v1/ipcache", 501, "without a datapath"},
		{"no kubernetes", nil, nil, "/v1/node", 501, "without Kubernetes"},
		{"ipcache", fakeIPCache{entries: entries}, nil, "/v1/ipcache", 200,
			`[{"prefix":"10.0.2.5/32","identity":4242,"tunnelEndpoint":"192.168.1.2"}]`},
		{"empty ipcache is a list", fakeIPCache{}, nil, "/v1/ipcache", 200, `[]`},
		{"ipcache error", fakeIPCache{err: errors.New("iterate ipcache: boom")}, nil, "/v1/ipcache", 500, "boom"},
		{"nodes", nil, fakeNodes(nodes), "/v1/node", 200,
			`[{"name":"n1","ipv4":"192.168.1.1","podCIDR":"10.0.1.0/24","local":true}]`},
		{"cluster nodes without kubernetes", nil, nil, "/v1/cluster/nodes", 501, "without Kubernetes"},
		// Cilium's shape, which Cilium's clients decode.
		{"cluster nodes", nil, fakeNodes(nodes), "/v1/cluster/nodes", 200,
			`{"nodes-added":[{"name":"default/n1","primary-address":{"ipv4":{"alloc-range":"10.0.1.0/24","enabled":true,"ip":"192.168.1.1"}},` +
				`"secondary-addresses":[],"source":"local"}],"nodes-removed":[],"self":"default/n1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.s.p.IPCache, f.s.p.Nodes = tc.ipcache, tc.nodes
			var raw rawBody
			code := f.do(t, http.MethodGet, tc.path, "", &raw)
			if code != tc.code || !strings.Contains(string(raw), tc.want) {
				t.Fatalf("GET %s: %d %s, want %d with %s", tc.path, code, raw, tc.code, tc.want)
			}
		})
	}
}

// rawBody keeps the JSON answer as it came.
type rawBody []byte

func (r *rawBody) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }

type fakeFQDN []models.DNSLookup

func (f fakeFQDN) Lookups() []models.DNSLookup { return f }

// GET /v1/fqdn/cache lists the FQDN cache with Cilium's filters; without
// the proxy it is 501, and a bad filter 400 naming it.
func TestFQDNCache(t *testing.T) {
	cache := fakeFQDN{
		{Fqdn: "docs.cilium.io.", Ips: []string{"192.0.2.1"}, TTL: 60, EndpointID: 7, Source: "lookup"},
		{Fqdn: "evil.example.", Ips: []string{"198.51.100.9"}, TTL: 30, EndpointID: 8, Source: "connection"},
	}
	for _, tc := range []struct {
		name  string
		fqdn  FQDNCache
		path  string
		code  int
		want  string
		wantN int
	}{
		{"no proxy", nil, "/v1/fqdn/cache", 501, "without the layer-7 proxy", 0},
		{"all", cache, "/v1/fqdn/cache", 200, `"expiration-time"`, 2},
		{"by pattern", cache, "/v1/fqdn/cache?matchpattern=*.cilium.io", 200, "docs.cilium.io.", 1},
		{"by endpoint", cache, "/v1/fqdn/cache/8", 200, "evil.example.", 1},
		{"by cidr", cache, "/v1/fqdn/cache?cidr=198.51.100.0/24", 200, "evil.example.", 1},
		{"by source", cache, "/v1/fqdn/cache?source=lookup", 200, "docs.cilium.io.", 1},
		{"none", cache, "/v1/fqdn/cache/9", 200, "[]", 0},
		{"bad cidr", cache, "/v1/fqdn/cache?cidr=nope", 400, "cidr", 0},
		{"bad pattern", cache, "/v1/fqdn/cache?matchpattern=a%20b", 400, "matchpattern", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.s.p.FQDN = tc.fqdn
			var raw rawBody
			code := f.do(t, http.MethodGet, tc.path, "", &raw)
			if code != tc.code || !strings.Contains(string(raw), tc.want) {
				t.Fatalf("GET %s: %d %s, want %d with %s", tc.path, code, raw, tc.code, tc.want)
			}
			if code == 200 && strings.Count(string(raw), `"fqdn"`) != tc.wantN {
				t.Fatalf("GET %s: %s, want %d lookups", tc.path, raw, tc.wantN)
			}
		})
	}
}
