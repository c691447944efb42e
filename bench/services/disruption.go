package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// Maglev's disruption: a LoadBalancer address of disruptBackends
// backends, reached from the world through node 1. disruptFlows flows
// (the world's source ports) connect, and node 1's service entries in
// conntrack say which backend each got; one backend goes (the frontend
// is written again without it, as the control plane writes it), the
// entries are forgotten (as on a node the flows never reached), the same
// flows connect again, and the fraction whose backend changed is the
// disruption. Those of the backend that went must move: the ideal is
// 1/disruptBackends. The same with random picks, for comparison. Nothing
// listens on the backends' ports: a SYN that reached one is answered
// with a reset, and only node 1's entries count.
const (
	disruptBackends = 10
	disruptFlows    = 2000
	disruptPort     = 81
	disruptRev      = 6
	// The flows' source ports are below the world's ephemeral ports,
	// which the other parts' clients take.
	firstFlowPort = 10000
)

var vipDisrupt = netip.MustParseAddr("198.51.100.82")

// disruptionBackends are the backend pods at ports nothing listens on,
// disruptBackends of them, numbered apart from the measured ones.
func (b *bed) disruptionBackends() []spec.Backend {
	var bs []spec.Backend
	for i := range disruptBackends {
		p := b.backends[i%len(b.backends)]
		bs = append(bs, spec.Backend{ID: spec.BackendID(50 + i), Address: p.IP, Port: uint16(9000 + i), Protocol: spec.ProtoTCP})
	}
	return bs
}

// disruptions measures repetition r's disruption for both algorithms;
// the backend that goes is the repetition's.
func (b *bed) disruptions(r int, res *dpResults) error {
	f := spec.Frontend{Address: vipDisrupt, Port: disruptPort, Protocol: spec.ProtoTCP}
	all := b.disruptionBackends()
	gone := r % disruptBackends
	left := append(append([]spec.Backend{}, all[:gone]...), all[gone+1:]...)
	for _, alg := range []spec.LBFlags{spec.LBMaglev, 0} {
		flags := spec.LBLoadBalancer | alg
		if err := b.writeServiceFlags(f, disruptRev, flags, all); err != nil {
			return err
		}
		before, err := b.flowBackends(f)
		if err != nil {
			return err
		}
		if err := b.writeServiceFlags(f, disruptRev, flags, left); err != nil {
			return err
		}
		after, err := b.flowBackends(f)
		if err != nil {
			return err
		}
		moved := 0
		for port, be := range before {
			if after[port] != be {
				moved++
			}
		}
		res.moved[alg] = append(res.moved[alg], float64(moved)/float64(len(before)))
	}
	return b.deleteService(f, disruptRev, all)
}

// flowBackends forgets node 1's connections of the world, connects every
// flow to f and returns the backend node 1 gave each (by source port).
func (b *bed) flowBackends(f spec.Frontend) (map[uint16]spec.BackendID, error) {
	maps := b.c.Nodes[0].DP.Maps()
	world := func(a netip.Addr) bool { return a == dptest.WorldIP }
	if _, err := maps.FlushConntrack(world); err != nil {
		return nil, err
	}
	err := netnamespace.Do(b.c.WorldNS, func() error {
		silent := 0
		for i := range disruptFlows {
			if synFrom(firstFlowPort+i, netip.AddrPortFrom(f.Address, f.Port)) {
				continue
			}
			if silent++; silent > 20 {
				return fmt.Errorf("%d connections to %s got no answer", silent, f)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	conns, err := maps.Connections()
	if err != nil {
		return nil, err
	}
	out := map[uint16]spec.BackendID{}
	for _, c := range conns {
		// The flows' service entries: the world's ports to f.
		if c.Service && c.Dst == f.Address && c.DstPort == f.Port && c.Src == dptest.WorldIP &&
			c.SrcPort >= firstFlowPort && c.SrcPort < firstFlowPort+disruptFlows {
			out[c.SrcPort] = c.BackendID
		}
	}
	if len(out) != disruptFlows {
		return nil, fmt.Errorf("node 1 has service entries for %d of %d flows to %s", len(out), disruptFlows, f)
	}
	return out, nil
}

// synFrom connects from the local port to dst, where nothing listens,
// and says whether it got an answer (a reset) rather than a timeout.
func synFrom(port int, dst netip.AddrPort) bool {
	d := net.Dialer{Timeout: 200 * time.Millisecond, LocalAddr: &net.TCPAddr{Port: port},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			})
			return errors.Join(err, serr)
		}}
	c, err := d.Dial("tcp4", dst.String())
	if err == nil {
		c.Close()
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
