// Package l2announce makes LoadBalancer and external addresses of
// Services reachable on a plain L2 segment: one node per Service answers
// ARP for them, as Cilium's L2 announcements do. CiliumL2AnnouncementPolicies
// say which nodes may announce which Services on which devices (Wanted, a
// pure function, turns them into this node's candidates); one coordination
// Lease per Service elects the node that does; what this node won goes
// into the l2-announcements table, whose reconciler writes the datapath's
// responder map and sends a gratuitous ARP for each address it takes over.
package l2announce

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	"github.com/cilium-go/cilium/pkg/lbipam"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// The condition types of a policy that the agents cannot use, Cilium's.
const (
	ConditionBadServiceSelector = "io.cilium/bad-service-selector"
	ConditionBadNodeSelector    = "io.cilium/bad-node-selector"
	ConditionBadInterfaceRegex  = "io.cilium/bad-interface-regex"
)

// ConditionTypes are the three, in the order a policy is read.
var ConditionTypes = []string{ConditionBadServiceSelector, ConditionBadNodeSelector, ConditionBadInterfaceRegex}

// Policy is a CiliumL2AnnouncementPolicy as the agent uses it.
type Policy struct {
	Name            string
	Nodes, Services labels.Selector
	LoadBalancerIPs bool
	ExternalIPs     bool
	// Interfaces match device names; none matches every device.
	Interfaces []*regexp.Regexp
}

// PolicyOf reads p. A policy with a part the agent cannot use is not used
// at all (it announces nothing rather than more than it says): problems
// maps the condition type that names the part to what is wrong with it.
func PolicyOf(p *v2alpha1.CiliumL2AnnouncementPolicy) (Policy, map[string]error) {
	pol := Policy{Name: p.Name, LoadBalancerIPs: p.Spec.LoadBalancerIPs, ExternalIPs: p.Spec.ExternalIPs}
	problems := map[string]error{}
	var err error
	if pol.Services, err = selector(p.Spec.ServiceSelector); err != nil {
		problems[ConditionBadServiceSelector] = fmt.Errorf("spec.serviceSelector: %w", err)
	}
	if pol.Nodes, err = selector(p.Spec.NodeSelector); err != nil {
		problems[ConditionBadNodeSelector] = fmt.Errorf("spec.nodeSelector: %w", err)
	}
	var bad []error
	for i, expr := range p.Spec.Interfaces {
		re, err := regexp.Compile(expr)
		if err != nil {
			bad = append(bad, fmt.Errorf("spec.interfaces[%d]: %w", i, err))
			continue
		}
		pol.Interfaces = append(pol.Interfaces, re)
	}
	if len(bad) > 0 {
		problems[ConditionBadInterfaceRegex] = errors.Join(bad...)
	}
	return pol, problems
}

// selector is s as a labels.Selector; nil selects everything.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// Entry is an address announced on a device.
type Entry struct {
	Address netip.Addr
	Device  string
}

func (e Entry) String() string { return e.Address.String() + "@" + e.Device }

// Node is what Wanted needs of a node.
type Node struct {
	Name   string
	Labels map[string]string
	// Devices are the names of the devices the datapath serves.
	Devices []string
}

// Wanted returns the Services node may announce and, for each, the
// entries it would hold as their announcer. A Service is a candidate when
// a policy that selects the node selects it, and:
//   - it is ours (not headless, not another proxy's) and its
//     loadBalancerClass is unset or io.cilium/l2-announcer;
//   - with externalTrafficPolicy Local, the node has a ready backend of
//     it: no other node may hold its announcement, which would send the
//     traffic where nothing serves it and lose the client's address;
//   - the policy announces an address it has (its LoadBalancer addresses
//     with loadBalancerIPs, its ExternalIPs with externalIPs) on a device
//     that the policy's interfaces match.
func Wanted(node Node, policies []Policy, services []*loadbalancer.ServiceRow) map[loadbalancer.ServiceName][]Entry {
	out := map[loadbalancer.ServiceName][]Entry{}
	for _, p := range policies {
		if !p.Nodes.Matches(labels.Set(node.Labels)) {
			continue
		}
		devices := p.devices(node.Devices)
		if len(devices) == 0 {
			continue
		}
		for _, s := range services {
			if !announceable(s, node.Name) || !p.Services.Matches(serviceLabels(s.Service)) {
				continue
			}
			var addrs []netip.Addr
			if p.LoadBalancerIPs {
				addrs = append(addrs, s.LoadBalancerIPs...)
			}
			if p.ExternalIPs {
				addrs = append(addrs, s.ExternalIPs...)
			}
			for _, a := range addrs {
				if !a.Is4() {
					continue
				}
				for _, d := range devices {
					out[s.Name] = append(out[s.Name], Entry{Address: a, Device: d})
				}
			}
		}
	}
	for n, es := range out {
		slices.SortFunc(es, func(a, b Entry) int {
			if c := a.Address.Compare(b.Address); c != 0 {
				return c
			}
			return strings.Compare(a.Device, b.Device)
		})
		out[n] = slices.Compact(es)
	}
	return out
}

func announceable(s *loadbalancer.ServiceRow, node string) bool {
	if !loadbalancer.Ours(s.Service) {
		return false
	}
	if c := s.LoadBalancerClass; c != "" && c != v2alpha1.L2AnnounceLoadBalancerClass {
		return false
	}
	return !s.ExternalLocal || slices.Contains(s.ReadyNodes, node)
}

// Owners picks, for each Service that some of nodes may announce, the one
// that does: of those that may, the one whose hash with the Service's
// name is highest (rendezvous hashing). Every node that sees the same
// nodes picks the same owner, and a node that goes or comes moves only the
// Services it owned or now owns. nodes are the live ones.
func Owners(nodes []Node, policies []Policy, services []*loadbalancer.ServiceRow) map[loadbalancer.ServiceName]string {
	out := map[loadbalancer.ServiceName]string{}
	best := map[loadbalancer.ServiceName]uint64{}
	for _, n := range nodes {
		for s := range Wanted(n, policies, services) {
			h := fnv.New64a()
			h.Write([]byte(s.String() + "\x00" + n.Name))
			if score := h.Sum64(); out[s] == "" || score > best[s] || score == best[s] && n.Name < out[s] {
				out[s], best[s] = n.Name, score
			}
		}
	}
	return out
}

// devices are the devices p announces on, of those given.
func (p Policy) devices(all []string) []string {
	if len(p.Interfaces) == 0 {
		return all
	}
	var out []string
	for _, d := range all {
		if slices.ContainsFunc(p.Interfaces, func(re *regexp.Regexp) bool { return re.MatchString(d) }) {
			out = append(out, d)
		}
	}
	return out
}

// serviceLabels are s's labels with its namespace and name, as LB-IPAM's
// pools select Services.
func serviceLabels(s loadbalancer.Service) labels.Set {
	return lbipam.ServiceLabels(lbipam.Name{Namespace: s.Name.Namespace, Name: s.Name.Name}, s.Labels)
}

// leasePrefix starts the name of every announcement Lease.
const leasePrefix = "cilium-l2announce-"

// LeaseName is the name of the Lease that elects s's announcer, Cilium's.
func LeaseName(s loadbalancer.ServiceName) string {
	return leasePrefix + s.Namespace + "-" + s.Name
}
