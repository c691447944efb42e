package plan

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestWorld(t *testing.T) {
	o := options()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	w := p.World
	want := World{
		CIDR:   netip.MustParsePrefix("192.0.2.0/24"),
		Target: WorldHost{Name: "world.cilium-lab.test", IP: netip.MustParseAddr("192.0.2.1")},
		Other:  WorldHost{Name: "other.world.cilium-lab.test", IP: netip.MustParseAddr("192.0.2.2")},
		Guides: []WorldHost{
			{Name: "api.github.com", IP: netip.MustParseAddr("192.0.2.3")},
			{Name: "support.github.com", IP: netip.MustParseAddr("192.0.2.4")},
			{Name: "gist.github.com", IP: netip.MustParseAddr("192.0.2.5")},
			{Name: "github.com", IP: netip.MustParseAddr("192.0.2.6")},
		},
	}
	if !reflect.DeepEqual(w, want) {
		t.Fatalf("world %+v, want %+v", w, want)
	}
	// The world is beyond every prefix the cluster routes itself.
	for _, h := range w.Hosts() {
		for _, pfx := range []netip.Prefix{p.Underlay, p.ClusterCIDR, p.ServiceCIDR} {
			if pfx.Contains(h.IP) {
				t.Errorf("world address %s inside %s", h.IP, pfx)
			}
		}
		if !w.CIDR.Contains(h.IP) {
			t.Errorf("world address %s outside the world's %s", h.IP, w.CIDR)
		}
	}

	// Another prefix, given unmasked, is masked; the two addresses follow it,
	// and no guide's name has room.
	o.World = netip.MustParsePrefix("198.51.100.77/30")
	p, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	if p.World.CIDR.String() != "198.51.100.76/30" || p.World.Target.IP.String() != "198.51.100.77" ||
		p.World.Other.IP.String() != "198.51.100.78" || len(p.World.Guides) != 0 {
		t.Errorf("world in 198.51.100.77/30: %+v", p.World)
	}
	// A /29 has just room for them all (.15 is its broadcast address).
	o.World = netip.MustParsePrefix("198.51.100.8/29")
	if p, err = New(o); err != nil {
		t.Fatal(err)
	}
	if g := p.World.Guides; len(g) != 4 || g[3].IP.String() != "198.51.100.14" {
		t.Errorf("guides in 198.51.100.8/29: %+v", g)
	}
}

func TestConnectivityTestFlags(t *testing.T) {
	p, err := New(options())
	if err != nil {
		t.Fatal(err)
	}
	flags, err := p.World.ConnectivityTestFlags()
	if err != nil {
		t.Fatal(err)
	}
	want := "--external-target world.cilium-lab.test. --external-other-target other.world.cilium-lab.test. " +
		"--external-ip 192.0.2.1 --external-other-ip 192.0.2.2 --external-cidr 192.0.2.0/24 --curl-insecure"
	if got := strings.Join(flags, " "); got != want {
		t.Errorf("flags\n%s\nwant\n%s", got, want)
	}

	// A plan saved before the lab had a world has none to point at.
	var old Plan
	if err := json.Unmarshal([]byte(`{"name":"lab","outside":{"name":"lab-outside"}}`), &old); err != nil {
		t.Fatal(err)
	}
	if _, err := old.World.ConnectivityTestFlags(); !errors.Is(err, ErrNoWorld) {
		t.Errorf("flags of a plan without a world: %v, want ErrNoWorld", err)
	}
}
