package datapath

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// InvalidateRoutes moves the route generation: every FIB answer the
// programs cached before is looked up again. Call it after changing
// routes, neighbours or links of the node. The new generation is random,
// not the old one plus one: two writers (the route watch and a route
// change, or two processes) that read the same old value must not write
// the same new one, which a program may already have cached answers under.
func (m *Maps) InvalidateRoutes() error {
	var zero, old uint32
	if err := m.FIBGen.Lookup(&zero, &old); err != nil {
		return fmt.Errorf("read route generation: %w", err)
	}
	gen := rand.Uint32()
	for gen == old {
		gen = rand.Uint32()
	}
	if err := m.FIBGen.Update(&zero, &gen, 0); err != nil {
		return fmt.Errorf("bump route generation: %w", err)
	}
	return nil
}

// RouteGeneration is the current route generation.
func (m *Maps) RouteGeneration() (uint32, error) {
	var zero, gen uint32
	if err := m.FIBGen.Lookup(&zero, &gen); err != nil {
		return 0, fmt.Errorf("read route generation: %w", err)
	}
	return gen, nil
}

// watchRoutes invalidates the programs' FIB cache on every route,
// neighbour and link change in the namespace at nsPath (empty: the
// current one) until ctx ends. It returns once subscribed, so that no
// change after its return goes unseen, and a channel closed when the
// watch has ended: only then may m close. A lost subscription invalidates
// too; the cache's lifetime bounds staleness until ctx ends.
func watchRoutes(ctx context.Context, nsPath string, m *Maps, log *slog.Logger) (<-chan struct{}, error) {
	ns := netns.None()
	if nsPath != "" {
		h, err := netns.GetFromPath(nsPath)
		if err != nil {
			return nil, fmt.Errorf("open netns %s: %w", nsPath, err)
		}
		defer h.Close() // the subscriptions keep their own sockets
		ns = h
	}
	nsp := &ns
	if nsPath == "" {
		nsp = nil
	}
	routes := make(chan netlink.RouteUpdate, 64)
	neighs := make(chan netlink.NeighUpdate, 64)
	links := make(chan netlink.LinkUpdate, 64)
	lost := make(chan error, 3)
	onErr := func(err error) {
		select {
		case lost <- err:
		default:
		}
	}
	done := ctx.Done()
	if err := netlink.RouteSubscribeWithOptions(routes, done,
		netlink.RouteSubscribeOptions{Namespace: nsp, ErrorCallback: onErr}); err != nil {
		return nil, fmt.Errorf("subscribe to routes: %w", err)
	}
	if err := netlink.NeighSubscribeWithOptions(neighs, done,
		netlink.NeighSubscribeOptions{Namespace: nsp, ErrorCallback: onErr}); err != nil {
		return nil, fmt.Errorf("subscribe to neighbours: %w", err)
	}
	if err := netlink.LinkSubscribeWithOptions(links, done,
		netlink.LinkSubscribeOptions{Namespace: nsp, ErrorCallback: onErr}); err != nil {
		return nil, fmt.Errorf("subscribe to links: %w", err)
	}
	// Anything cached before the subscriptions existed is suspect.
	if err := m.InvalidateRoutes(); err != nil {
		return nil, err
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-lost:
				log.Warn("route watch", "error", err)
			case _, ok := <-routes:
				if !ok {
					routes = nil
				}
			case _, ok := <-neighs:
				if !ok {
					neighs = nil
				}
			case _, ok := <-links:
				if !ok {
					links = nil
				}
			}
			if err := m.InvalidateRoutes(); err != nil {
				log.Warn("route watch", "error", err)
			}
		}
	}()
	return ended, nil
}
