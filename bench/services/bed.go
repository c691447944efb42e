package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
)

const (
	echoPort   = 8080 // the backends' one-byte echo
	streamPort = 5001 // the backends' sink
	// measuredFrontends are the ClusterIP's two ports (80 to the echo,
	// 5001 to the sink) and the echo's frontends for clients from
	// outside: a NodePort and two LoadBalancer addresses. They count
	// among the services of a scale.
	measuredFrontends = 5
	nodePort          = 30080
	// maxScale keeps fillers' backend ids and reverse NAT indexes in range
	// and every entry in the maps' 65,536.
	maxScale   = 12000
	fillerBase = 100 // fillers' reverse NAT indexes start above the measured ones
)

// clusterIP is the measured Service's address; vipRandom and vipMaglev
// are its LoadBalancer addresses, which the world reaches through node 1:
// the first picks backends at random, the second by its Maglev table.
var (
	clusterIP = netip.MustParseAddr("10.96.0.10")
	vipRandom = netip.MustParseAddr("198.51.100.80")
	vipMaglev = netip.MustParseAddr("198.51.100.81")
)

// maglevSeed seeds the measured Maglev tables.
const maglevSeed = 0x5eed

// bed is a 2-node cluster in native routing: the client pod on node 1,
// the measured Service's backends on node 2, a client outside the
// cluster (the world host on the nodes' network, routed to the pods and
// the LoadBalancer addresses through node 1), and the service maps of
// both nodes holding the measured Service and as many fillers as the
// scale asks.
type bed struct {
	c        *dptest.Cluster
	client   *dptest.Pod
	backends []*dptest.Pod
	servers  []*traffic.Servers
	fillers  int // filler services in the maps now
	// cgroup has the socket programs of node 1 attached; "" without the
	// sock part.
	cgroup string
}

func newBed(log *slog.Logger, o options, onClose func(func() error)) (*bed, error) {
	log.Info("building the cluster")
	c, err := dptest.New(dptest.Options{Mode: spec.Native, PodsPerNode: 3, World: true, MaglevTableSize: 16381})
	if err != nil {
		return nil, err
	}
	onClose(c.Close)
	b := &bed{c: c, client: c.Nodes[0].Pods[0], backends: c.Nodes[1].Pods}
	for _, p := range b.backends {
		s, err := traffic.StartServers(p.NS, p.IP, streamPort, echoPort)
		if err != nil {
			return nil, err
		}
		onClose(s.Close)
		b.servers = append(b.servers, s)
	}
	// Connect/request/close reuses ports in TIME_WAIT, so that the rate
	// measures the datapath and not the ephemeral port range.
	for _, ns := range []string{b.client.NS, c.WorldNS} {
		err = netnamespace.Do(ns, func() error {
			return os.WriteFile("/proc/sys/net/ipv4/tcp_tw_reuse", []byte("1"), 0o644)
		})
		if err != nil {
			return nil, err
		}
	}
	if err := b.routeWorld(); err != nil {
		return nil, err
	}
	if err := b.writeMeasured(); err != nil {
		return nil, err
	}
	if o.want("sock") {
		if b.cgroup, err = newCgroup(onClose); err != nil {
			return nil, err
		}
		n1 := c.Nodes[0].DP
		if err := n1.AttachSocketLB(b.cgroup); err != nil {
			return nil, err
		}
		// Registered after the cgroup's removal, so it runs before.
		onClose(n1.DetachSocketLB)
	}
	return b, nil
}

// received is what every backend's sink has received.
func (b *bed) received() int64 {
	var n int64
	for _, s := range b.servers {
		n += s.Received()
	}
	return n
}

// echoAddrs are the backends' echo servers, which the baseline dials in
// turn, as the ClusterIP spreads its connections over them.
func (b *bed) echoAddrs() []netip.AddrPort {
	var out []netip.AddrPort
	for _, p := range b.backends {
		out = append(out, netip.AddrPortFrom(p.IP, echoPort))
	}
	return out
}

// routeWorld routes the world host's traffic to the pods and the
// LoadBalancer addresses through node 1.
func (b *bed) routeWorld() error {
	for _, dst := range []string{"10.10.0.0/16", "198.51.100.0/24"} {
		if err := b.c.RouteFromWorld(netip.MustParsePrefix(dst), b.c.Nodes[0].IP); err != nil {
			return err
		}
	}
	return nil
}

// writeService writes one frontend, its reverse NAT and its backends into
// every node's maps, as the control plane does.
func (b *bed) writeService(f spec.Frontend, rev uint16, backends []spec.Backend) error {
	return b.writeServiceFlags(f, rev, 0, backends)
}

// writeServiceFlags is writeService with the frontend's flags: with
// spec.LBMaglev, the Maglev table the control plane computes.
func (b *bed) writeServiceFlags(f spec.Frontend, rev uint16, flags spec.LBFlags, backends []spec.Backend) error {
	for _, n := range b.c.Nodes {
		m := n.DP.Maps()
		ids := make([]spec.BackendID, 0, len(backends))
		for _, be := range backends {
			if err := m.UpsertBackend(be); err != nil {
				return err
			}
			ids = append(ids, be.ID)
		}
		if err := m.UpsertRevNAT(spec.RevNAT{Index: rev, Address: f.Address, Port: f.Port}); err != nil {
			return err
		}
		svc := spec.Service{Frontend: f, Backends: ids, RevNATIndex: rev, Flags: flags}
		if flags&spec.LBMaglev != 0 {
			svc.Maglev = loadbalancer.MaglevTable(backends, m.MaglevTableSize(), maglevSeed)
		}
		if err := m.UpsertService(svc); err != nil {
			return err
		}
	}
	return nil
}

func (b *bed) deleteService(f spec.Frontend, rev uint16, backends []spec.Backend) error {
	for _, n := range b.c.Nodes {
		m := n.DP.Maps()
		if err := m.DeleteService(f); err != nil {
			return err
		}
		if err := m.DeleteRevNAT(rev); err != nil {
			return err
		}
		for _, be := range backends {
			if err := m.DeleteBackend(be.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeMeasured writes the measured Service: port 80 to the backends'
// echo, port 5001 to their sink, and the echo at the NodePort and the
// LoadBalancer addresses.
func (b *bed) writeMeasured() error {
	for i, port := range []uint16{echoPort, streamPort} {
		f := spec.Frontend{Address: clusterIP, Port: port, Protocol: spec.ProtoTCP}
		if port == echoPort {
			f.Port = 80
		}
		if err := b.writeService(f, uint16(i+1), b.backendsAt(10*(i+1), port)); err != nil {
			return err
		}
	}
	echo := b.backendsAt(10, echoPort)
	for _, o := range b.outsideFrontends() {
		if err := b.writeServiceFlags(o.f, o.rev, o.flags, echo); err != nil {
			return err
		}
	}
	return nil
}

// backendsAt are the backend pods at port, numbered from firstID.
func (b *bed) backendsAt(firstID int, port uint16) []spec.Backend {
	var bs []spec.Backend
	for j, p := range b.backends {
		bs = append(bs, spec.Backend{ID: spec.BackendID(firstID + j), Address: p.IP, Port: port, Protocol: spec.ProtoTCP})
	}
	return bs
}

type outsideFrontend struct {
	f     spec.Frontend
	rev   uint16
	flags spec.LBFlags
}

// outsideFrontends are the echo's frontends for clients from outside:
// node 1's NodePort and the two LoadBalancer addresses.
func (b *bed) outsideFrontends() []outsideFrontend {
	tcp := func(a netip.Addr, port uint16) spec.Frontend {
		return spec.Frontend{Address: a, Port: port, Protocol: spec.ProtoTCP}
	}
	return []outsideFrontend{
		{tcp(b.c.Nodes[0].IP, nodePort), 3, spec.LBNodePort},
		{tcp(vipRandom, 80), 4, spec.LBLoadBalancer},
		{tcp(vipMaglev, 80), 5, spec.LBLoadBalancer | spec.LBMaglev},
	}
}

// filler i is a ClusterIP with 2 to 4 backends at the cluster's pods, on
// ports nothing listens on: it is there to be in the maps.
func (b *bed) filler(i int) (spec.Frontend, uint16, []spec.Backend) {
	f := spec.Frontend{Address: netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)}), Port: 80, Protocol: spec.ProtoTCP}
	pods := b.c.Pods()
	var bs []spec.Backend
	for j := range 2 + i%3 {
		bs = append(bs, spec.Backend{ID: spec.BackendID(1000 + 4*i + j), Address: pods[(i+j)%len(pods)].IP,
			Port: uint16(10000 + (4*i+j)%50000), Protocol: spec.ProtoTCP})
	}
	return f, uint16(fillerBase + i), bs
}

// scaleTo makes the maps hold n services: the measured ones and fillers.
func (b *bed) scaleTo(n int) error {
	want := n - measuredFrontends
	for ; b.fillers < want; b.fillers++ {
		if err := b.writeService(b.filler(b.fillers)); err != nil {
			return fmt.Errorf("filler %d: %w", b.fillers, err)
		}
	}
	for ; b.fillers > want; b.fillers-- {
		if err := b.deleteService(b.filler(b.fillers - 1)); err != nil {
			return fmt.Errorf("filler %d: %w", b.fillers-1, err)
		}
	}
	return nil
}

// newCgroup makes a cgroup v2 directory for the socket-LB client, under
// wherever cgroup2 is mounted, and removes it at the end (its processes
// have ended by then).
func newCgroup(onClose func(func() error)) (string, error) {
	root, err := nodedatapath.Cgroup2Root()
	if err != nil {
		return "", fmt.Errorf("socket LB: %w (-parts without sock)", err)
	}
	dir, err := os.MkdirTemp(root, "cilium-go-bench-services-")
	if err != nil {
		return "", fmt.Errorf("socket LB cgroup: %w", err)
	}
	onClose(func() error {
		// A child just reaped may still hold the cgroup for a moment.
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return nil
			}
		}
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	})
	return dir, nil
}
