package plan

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
)

// World is the lab's stand-in for the internet: addresses on a prefix of their
// own (not the underlay, pods or Services), held by the outside client, which
// every machine routes to by default. Pods reach them as they reach the world,
// masqueraded to their node's address; the outside serves HTTP and HTTPS there
// (cilium-lab world-server), answers pings, and the cluster's DNS resolves their
// names, and no others beyond the cluster: a name of the world never leaves the
// lab. The first two are what cilium-cli's connectivity test calls the external
// target and the external other target.
type World struct {
	CIDR netip.Prefix `json:"cidr"`
	// Target is the suite's external target (and external IP), Other its
	// external other target (and external other IP).
	Target WorldHost `json:"target"`
	Other  WorldHost `json:"other"`
	// Guides are the outside names that Cilium's guides reach, so that
	// their commands run unchanged in the lab (GuideNames), each at an
	// address of its own, so that a toFQDNs rule for one name selects no
	// other's: those the prefix has room for after the other two.
	Guides []WorldHost `json:"guides,omitempty"`
}

// WorldHost is one address of the world and its name in the cluster's DNS.
type WorldHost struct {
	Name string     `json:"name"`
	IP   netip.Addr `json:"ip"`
}

// The world's names: under .test (RFC 6761), which no real resolver answers.
// WorldAliasName is a CNAME to the external target's name, as many names of the
// internet are.
const (
	WorldTargetName = "world.cilium-lab.test"
	WorldOtherName  = "other.world.cilium-lab.test"
	WorldAliasName  = "www.cilium-lab.test"
)

// GuideNames are the names beyond the cluster of Cilium's DNS-based policy
// guide (its examples/kubernetes-dns): the one its first policy allows, the
// one it then does not, and those its pattern *.github.com does and does
// not match.
var GuideNames = []string{"api.github.com", "support.github.com", "gist.github.com", "github.com"}

// newWorld places the world in cidr: the external target at its first address,
// the other at its second, the guides' names after them while the prefix has
// addresses that are not its last (its broadcast address).
func newWorld(cidr netip.Prefix) World {
	w := World{
		CIDR:   cidr,
		Target: WorldHost{Name: WorldTargetName, IP: nth(cidr.Addr(), 1)},
		Other:  WorldHost{Name: WorldOtherName, IP: nth(cidr.Addr(), 2)},
	}
	size := 1 << (32 - cidr.Bits())
	for i, name := range GuideNames {
		if 3+i >= size-1 {
			break
		}
		w.Guides = append(w.Guides, WorldHost{Name: name, IP: nth(cidr.Addr(), 3+i)})
	}
	return w
}

// Valid says whether the plan has a world: a lab made by an older cilium-lab
// has none.
func (w World) Valid() bool { return w.CIDR.IsValid() }

// Hosts are the world's addresses with their names, the external target first,
// the other second.
func (w World) Hosts() []WorldHost { return append([]WorldHost{w.Target, w.Other}, w.Guides...) }

// Zones are the DNS zones of the world's names (each name's last two labels),
// sorted: what the cluster's DNS forwards to the world's DNS server.
func (w World) Zones() []string {
	var zones []string
	for _, h := range w.Hosts() {
		labels := strings.Split(h.Name, ".")
		if len(labels) >= 2 {
			zones = append(zones, strings.Join(labels[len(labels)-2:], "."))
		}
	}
	slices.Sort(zones)
	return slices.Compact(zones)
}

// ErrNoWorld means the lab was made before it had a world.
var ErrNoWorld = errors.New("the lab has no world: it was made by an older cilium-lab (cilium-lab down, then up)")

// ConnectivityTestFlags are the flags of cilium-cli's `cilium connectivity test`
// that point its tests of the world (pod-to-world, pod-to-cidr, the CIDR
// policies, the pings) at the lab's world instead of 1.1.1.1 and 1.0.0.1, which
// the lab cannot reach. The names are fully qualified (a trailing dot), as the
// suite's own default; the certificate is the lab CA's, which no client trusts
// by default, hence --curl-insecure.
func (w World) ConnectivityTestFlags() ([]string, error) {
	if !w.Valid() {
		return nil, ErrNoWorld
	}
	return []string{
		"--external-target", w.Target.Name + ".",
		"--external-other-target", w.Other.Name + ".",
		"--external-ip", w.Target.IP.String(),
		"--external-other-ip", w.Other.IP.String(),
		"--external-cidr", w.CIDR.String(),
		"--curl-insecure",
	}, nil
}
