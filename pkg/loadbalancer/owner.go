package loadbalancer

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// Claim is a service's wish for one frontend.
type Claim struct {
	Service ServiceName
	// ClusterIP: the frontend is at one of the service's ClusterIPs.
	ClusterIP    bool
	CreationTime time.Time
	UID          string
}

// Owner picks the claim that gets a frontend. It depends on the claims
// alone, not on their order, so every node, and every restart, gives a
// contested frontend to the same service:
//   - a frontend at some Service's ClusterIP is that Service's: the API
//     server hands ClusterIPs out, while anyone who may write a Service
//     may write its ExternalIPs, so holders (the services whose ClusterIPs
//     include the frontend's address) alone may have it;
//   - a ClusterIP claim beats the other kinds;
//   - then the older service wins, by creation time, then UID, then name
//     (a service with neither, as in tests, is still ordered).
//
// false: nobody may have the frontend (no claim, or only claims by
// services other than the holders).
func Owner(claims []Claim, holders []ServiceName) (Claim, bool) {
	var best Claim
	found := false
	for _, c := range claims {
		if len(holders) > 0 && !slices.Contains(holders, c.Service) {
			continue
		}
		if !found || before(c, best) {
			best, found = c, true
		}
	}
	return best, found
}

// before orders claims, the winner first.
func before(a, b Claim) bool {
	if a.ClusterIP != b.ClusterIP {
		return a.ClusterIP
	}
	if c := a.CreationTime.Compare(b.CreationTime); c != 0 {
		return c < 0
	}
	return cmp.Or(cmp.Compare(a.UID, b.UID), cmpNames(a.Service, b.Service)) < 0
}

// claims are every known service's claims on frontends and the ClusterIPs
// it holds, whether or not its frontends fit in the maps: ownership
// depends on the cluster's Services alone.
type claims struct {
	// byIP holds the claims by frontend, the frontends by address.
	byIP map[netip.Addr]map[Addr]map[ServiceName]Claim
	// holders are the services that have an address as ClusterIP.
	holders map[netip.Addr][]ServiceName
	// of is what each service claims, to take it back.
	of map[ServiceName]serviceClaims
}

type serviceClaims struct {
	frontends []Addr
	ips       []netip.Addr
}

func newClaims() *claims {
	return &claims{byIP: map[netip.Addr]map[Addr]map[ServiceName]Claim{}, holders: map[netip.Addr][]ServiceName{},
		of: map[ServiceName]serviceClaims{}}
}

// owner is the service that gets frontend a, if any.
func (c *claims) owner(a Addr) (Claim, bool) {
	byService := c.byIP[a.Address][a]
	cs := make([]Claim, 0, len(byService))
	for _, cl := range byService {
		cs = append(cs, cl)
	}
	return Owner(cs, c.holders[a.Address])
}

// set makes s's claims those of its frontends fs and its ClusterIPs ips
// (none: s is gone) and returns the other services that gained or lost a
// frontend by it.
func (c *claims) set(s Service, fs []Frontend, ips []netip.Addr) []ServiceName {
	old := c.of[s.Name]
	// The frontends whose owner may change: those s claimed or claims,
	// and every one at an address that starts or stops being its
	// ClusterIP.
	touched := map[Addr]bool{}
	for _, a := range old.frontends {
		touched[a] = true
	}
	for _, f := range fs {
		touched[f.Addr] = true
	}
	for _, ip := range symmetricDifference(old.ips, ips) {
		for a := range c.byIP[ip] {
			touched[a] = true
		}
	}
	before := map[Addr]ServiceName{}
	for a := range touched {
		if o, ok := c.owner(a); ok {
			before[a] = o.Service
		}
	}

	c.drop(s.Name, old)
	if len(fs) > 0 || len(ips) > 0 {
		c.add(s, fs, ips)
	}

	var changed []ServiceName
	for a := range touched {
		o, ok := c.owner(a)
		if was, had := before[a]; had != ok || was != o.Service {
			if had && was != s.Name {
				changed = append(changed, was)
			}
			if ok && o.Service != s.Name {
				changed = append(changed, o.Service)
			}
		}
	}
	slices.SortFunc(changed, cmpNames)
	return slices.Compact(changed)
}

// drop takes back what n claimed.
func (c *claims) drop(n ServiceName, old serviceClaims) {
	for _, a := range old.frontends {
		delete(c.byIP[a.Address][a], n)
		if len(c.byIP[a.Address][a]) == 0 {
			delete(c.byIP[a.Address], a)
		}
		if len(c.byIP[a.Address]) == 0 {
			delete(c.byIP, a.Address)
		}
	}
	for _, ip := range old.ips {
		c.holders[ip] = slices.DeleteFunc(c.holders[ip], func(h ServiceName) bool { return h == n })
		if len(c.holders[ip]) == 0 {
			delete(c.holders, ip)
		}
	}
	delete(c.of, n)
}

// add records s's claims on its frontends fs and its ClusterIPs ips.
func (c *claims) add(s Service, fs []Frontend, ips []netip.Addr) {
	now := serviceClaims{ips: slices.Clone(ips)}
	for _, f := range fs {
		if c.byIP[f.Address] == nil {
			c.byIP[f.Address] = map[Addr]map[ServiceName]Claim{}
		}
		if c.byIP[f.Address][f.Addr] == nil {
			c.byIP[f.Address][f.Addr] = map[ServiceName]Claim{}
		}
		c.byIP[f.Address][f.Addr][s.Name] = Claim{Service: s.Name, ClusterIP: f.Kind() == "ClusterIP",
			CreationTime: s.CreationTime, UID: s.UID}
		now.frontends = append(now.frontends, f.Addr)
	}
	for _, ip := range ips {
		c.holders[ip] = append(c.holders[ip], s.Name)
	}
	c.of[s.Name] = now
}

// symmetricDifference lists the addresses in a or b but not both.
func symmetricDifference(a, b []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, x)
		}
	}
	return out
}
