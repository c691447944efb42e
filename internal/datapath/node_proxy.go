package datapath

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The node's policy routing for the layer-7 proxy, Cilium's numbers: a
// packet the datapath marked MARK_TO_PROXY (bpf/lib/proxy.h) is delivered
// locally whatever its destination, to the socket the datapath assigned
// it or to the proxy's socket of its connection.
const (
	proxyRouteTable   = 2004
	proxyRulePriority = 9
	markToProxy       = 0x0200
	markMagicMask     = 0x0f00
)

func proxyRule() *netlink.Rule {
	r := netlink.NewRule()
	r.Family = unix.AF_INET
	r.Priority = proxyRulePriority
	r.Mark = markToProxy
	m := uint32(markMagicMask)
	r.Mask = &m
	r.Table = proxyRouteTable
	return r
}

func (n *Node) proxyRoute() (*netlink.Route, error) {
	lo, err := n.nl.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("proxy routing: %w", err)
	}
	return &netlink.Route{
		Family: unix.AF_INET, Table: proxyRouteTable, Type: unix.RTN_LOCAL, Scope: unix.RT_SCOPE_HOST,
		Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, LinkIndex: lo.Attrs().Index,
		Protocol: RouteProtocol,
	}, nil
}

// ensureProxyRouting installs the rule and the local route, idempotently.
func (n *Node) ensureProxyRouting() error {
	route, err := n.proxyRoute()
	if err != nil {
		return err
	}
	if err := n.nl.RouteReplace(route); err != nil {
		return fmt.Errorf("proxy routing: route table %d: %w", proxyRouteTable, err)
	}
	if err := n.nl.RuleAdd(proxyRule()); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("proxy routing: rule fwmark %#x/%#x: %w", markToProxy, markMagicMask, err)
	}
	return nil
}

// removeProxyRouting undoes ensureProxyRouting; what is gone already is
// no error.
func (n *Node) removeProxyRouting() error {
	var errs []error
	if err := n.nl.RuleDel(proxyRule()); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("proxy routing: rule: %w", err))
	}
	if route, err := n.proxyRoute(); err == nil {
		if err := n.nl.RouteDel(route); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("proxy routing: route: %w", err))
		}
	}
	return errors.Join(errs...)
}
