package world

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"
)

// The world's DNS answers a host's address, an alias's CNAME with its
// target's address, and NXDOMAIN for any other name, as Go's own
// resolver reads them.
func TestDNSAnswers(t *testing.T) {
	zone := Zone{
		Hosts:   map[string]netip.Addr{"world.test": netip.MustParseAddr("192.0.2.1"), "other.test": netip.MustParseAddr("192.0.2.2")},
		Aliases: map[string]string{"alias.test": "world.test"},
	}
	s, err := ListenDNS(netip.MustParseAddrPort("127.0.0.1:0"), zone)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr().String())
	}}
	ctx := context.Background()
	for name, want := range map[string]string{"world.test": "192.0.2.1", "OTHER.test.": "192.0.2.2", "alias.test": "192.0.2.1"} {
		if got, err := r.LookupHost(ctx, name); err != nil || !slices.Equal(got, []string{want}) {
			t.Errorf("%s: %v, %v; want %s", name, got, err, want)
		}
	}
	if got, err := r.LookupCNAME(ctx, "alias.test"); err != nil || got != "world.test." {
		t.Errorf("CNAME of alias.test: %q, %v", got, err)
	}
	var dnsErr *net.DNSError
	if got, err := r.LookupHost(ctx, "nowhere.test"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("nowhere.test: %v, %v; want NXDOMAIN", got, err)
	}

	if _, err := ListenDNS(netip.MustParseAddrPort("127.0.0.1:0"), Zone{Aliases: map[string]string{"a.test": "b.test"}}); err == nil {
		t.Error("an alias to no host was taken")
	}
}
