package agent

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"

	"github.com/cilium-go/cilium/pkg/fqdn"
)

// noPolicy takes the names and has every entry already.
type noPolicy struct{}

func (noPolicy) SetFQDNNames(map[netip.Addr][]string)       {}
func (noPolicy) AwaitEntries(context.Context, uint16) error { return nil }

// NamesOf answers what the cache held at its last change, per endpoint,
// from the first restore on: Hubble names flows after an agent restart
// as before it.
func TestNamesOfFollowsTheCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fqdn-cache.json")
	ip := netip.MustParseAddr("192.0.2.10")
	m := newNameManager(hivetest.Logger(t), nil, nil, nil, noPolicy{}, nil, fqdn.CacheConfig{}, path)
	if got := m.NamesOf(7, ip); got != nil {
		t.Fatalf("names before any lookup: %v", got)
	}
	m.mu.Lock()
	m.cache.Learn(fqdn.Lookup{Endpoint: 7, Name: "world.example", IPs: []netip.Addr{ip}, TTL: 300, Time: time.Now()})
	m.changed()
	m.mu.Unlock()
	if got := m.NamesOf(7, ip); !slices.Equal(got, []string{"world.example."}) {
		t.Errorf("endpoint 7's names of %s: %v", ip, got)
	}
	if got := m.NamesOf(8, ip); got != nil {
		t.Errorf("endpoint 8 learned nothing: %v", got)
	}

	restarted := newNameManager(hivetest.Logger(t), nil, nil, nil, noPolicy{}, nil, fqdn.CacheConfig{}, path)
	if err := restarted.restore(); err != nil {
		t.Fatal(err)
	}
	if got := restarted.NamesOf(7, ip); !slices.Equal(got, []string{"world.example."}) {
		t.Errorf("after a restart, endpoint 7's names of %s: %v", ip, got)
	}
}
