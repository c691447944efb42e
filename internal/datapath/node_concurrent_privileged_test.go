package datapath

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
)

// The agent's reconcilers and jobs share one Node (endpoints, remote-node
// routes, Services' sockets, the API) while its lifecycle starts and
// closes it. Under go test -race this fails without Node's lock: Start
// and Close replace the netlink handle and the maps that the others use.
// Between Close and Start the methods answer ErrNotStarted, never panic.
func TestPrivilegedNodeConcurrentUse(t *testing.T) {
	testenv.Privileged(t) // creates a namespace, links, routes and BPF programs
	node, ns := startRouteTestNode(t, spec.Native)
	nl, err := netnamespace.Netlink(ns)
	must(t, err)
	t.Cleanup(func() { nl.Close() })
	host := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lxcrace"}, PeerName: "lxcracepeer"}
	must(t, nl.LinkAdd(host))
	for _, name := range []string{host.Name, host.PeerName} {
		l, err := nl.LinkByName(name)
		must(t, err)
		must(t, nl.LinkSetUp(l))
	}
	ep := spec.Endpoint{ID: 7, Identity: 1000, IPv4: netip.MustParseAddr("10.1.0.7"),
		MAC: net.HardwareAddr{2, 0, 0, 0, 0, 7}, HostDevice: host.Name}
	remote := spec.RemoteNode{IPv4: netip.MustParseAddr("192.168.77.2"), PodCIDR: netip.MustParsePrefix("10.2.0.0/24")}

	// ok is what a caller may see while the node restarts under it.
	ok := func(what string, err error) {
		if err != nil && !errors.Is(err, ErrNotStarted) && !errors.Is(err, ErrSockDestroyUnsupported) {
			t.Errorf("%s: %v", what, err)
		}
	}
	restarted := make(chan struct{})
	// Each user runs until the restarts are over, and at least once.
	user := func(op func()) func() {
		return func() {
			for {
				op()
				select {
				case <-restarted:
					return
				default:
				}
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(user(func() { // the endpoint reconciler
		if err := node.UpsertEndpoint(ep); err != nil {
			ok("upsert endpoint", err)
			return
		}
		ok("delete endpoint", node.DeleteEndpoint(ep))
		ok("prune endpoints", node.PruneEndpoints(nil))
	}))
	wg.Go(user(func() { // the remote-node route reconciler
		ok("upsert remote node", node.UpsertRemoteNode(remote))
		_, err := node.RemoteNodes()
		ok("remote nodes", err)
		ok("delete remote node", node.DeleteRemoteNode(remote))
	}))
	wg.Go(user(func() { // Services' sockets, the API, the jobs that read the maps
		_, err := node.DestroySocketsTo(netip.MustParseAddrPort("10.3.0.1:53"), spec.ProtoUDP)
		ok("destroy sockets", err)
		_, err = node.PodMTU()
		ok("pod MTU", err)
		_ = node.PodDevice()
		_ = node.Maps()
	}))
	wg.Go(func() { // the agent's lifecycle
		defer close(restarted)
		for range 3 {
			ok("close", node.Close())
			ok("start", node.Start())
		}
	})
	wg.Wait()

	// The node the restarts left behind works.
	must(t, node.UpsertEndpoint(ep))
	must(t, node.UpsertRemoteNode(remote))
	got, err := node.RemoteNodes()
	must(t, err)
	if len(got) != 1 || got[0] != remote {
		t.Errorf("remote nodes %v, want %v", got, remote)
	}
}
