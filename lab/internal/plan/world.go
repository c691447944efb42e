package plan

import (
	"errors"
	"net/netip"
)

// World is the lab's stand-in for the internet: two addresses on a prefix of
// their own (not the underlay, pods or Services), held by the outside client,
// which every machine routes to by default. Pods reach them as they reach the
// world, masqueraded to their node's address; the outside serves HTTP and HTTPS
// there (cilium-lab world-server), answers pings, and the cluster's DNS resolves
// their names. They are what cilium-cli's connectivity test calls the external
// target and the external other target.
type World struct {
	CIDR netip.Prefix `json:"cidr"`
	// Target is the suite's external target (and external IP), Other its
	// external other target (and external other IP).
	Target WorldHost `json:"target"`
	Other  WorldHost `json:"other"`
}

// WorldHost is one address of the world and its name in the cluster's DNS.
type WorldHost struct {
	Name string     `json:"name"`
	IP   netip.Addr `json:"ip"`
}

// The world's names: under .test (RFC 6761), which no real resolver answers.
const (
	WorldTargetName = "world.cilium-lab.test"
	WorldOtherName  = "other.world.cilium-lab.test"
)

// newWorld places the world in cidr: the external target at its first address,
// the other at its second.
func newWorld(cidr netip.Prefix) World {
	return World{
		CIDR:   cidr,
		Target: WorldHost{Name: WorldTargetName, IP: nth(cidr.Addr(), 1)},
		Other:  WorldHost{Name: WorldOtherName, IP: nth(cidr.Addr(), 2)},
	}
}

// Valid says whether the plan has a world: a lab made by an older cilium-lab
// has none.
func (w World) Valid() bool { return w.CIDR.IsValid() }

// Hosts are the world's addresses with their names, the external target first.
func (w World) Hosts() []WorldHost { return []WorldHost{w.Target, w.Other} }

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
