package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
)

// TestAgentReleasesOrphanedAddressesAfterRestore: an address allocated
// by an ADD that the agent's crash cut short (no endpoint) is freed a
// grace period after the restart; one whose ADD is retried, and one with
// an endpoint, stay.
func TestAgentReleasesOrphanedAddressesAfterRestore(t *testing.T) {
	dir := t.TempDir()
	h, err := startAgent(t, endpointtest.NewDatapath(), baseArgs(dir)...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(filepath.Join(dir, "run", "cilium.sock"))
	ctx := context.Background()
	for _, owner := range []string{"crashed", "retried", "alive"} {
		if _, err := c.AllocateIP(ctx, owner); err != nil {
			t.Fatal(err)
		}
	}
	alive, _ := c.Allocations(ctx)
	if _, err := c.PutEndpoint(ctx, models.EndpointRequest{ContainerID: "alive", IPv4: alive[2].IP,
		MAC: "02:00:00:00:00:01", IfName: "eth0", HostIfName: "lxc1", HostIfindex: 5, NetNSPath: "/proc/1/ns/net"}); err != nil {
		t.Fatal(err)
	}
	stop(t, h)

	h, err = startAgent(t, endpointtest.NewDatapath(),
		append(baseArgs(dir), "--ipam-orphan-grace-period=300ms")...)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, h)
	// The runtime retries the ADD that the crash cut short.
	if _, err := c.AllocateIP(ctx, "retried"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error { // the orphaned address freed
		als, err := c.Allocations(ctx)
		if err != nil {
			return err
		}
		if len(als) != 2 {
			return fmt.Errorf("allocations %+v, want the crashed ADD's freed", als)
		}
		return nil
	})
	als, _ := c.Allocations(ctx)
	if als[0].Owner != "retried" || als[1].Owner != "alive" {
		t.Fatalf("allocations %+v, want retried and alive", als)
	}
}

// TestAgentRestoreIncompleteClears: an endpoint that fails to restore
// makes the agent not ready ("restore incomplete"), and that clears once
// a retry programs it; it never stays for the agent's lifetime.
func TestAgentRestoreIncompleteClears(t *testing.T) {
	dir := t.TempDir()
	h, err := startAgent(t, endpointtest.NewDatapath(), baseArgs(dir)...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(filepath.Join(dir, "run", "cilium.sock"))
	ctx := context.Background()
	alloc, err := c.AllocateIP(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutEndpoint(ctx, models.EndpointRequest{ContainerID: "c1", IPv4: alloc.Address,
		MAC: "02:00:00:00:00:01", IfName: "eth0", HostIfName: "lxc1", HostIfindex: 5, NetNSPath: "/proc/1/ns/net"}); err != nil {
		t.Fatal(err)
	}
	stop(t, h)

	// A datapath that cannot program the endpoint for a while.
	dp := endpointtest.NewDatapath()
	dp.Fail(errors.New("map busy"))
	h, err = startAgent(t, dp, baseArgs(dir)...)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, h)
	level := func() string {
		hz, _ := c.Healthz(ctx)
		for _, m := range hz.Modules {
			if m.Module == "endpoint-manager" {
				return m.Level + ": " + m.Message
			}
		}
		return ""
	}
	if l := level(); l != "Degraded: restore incomplete" && l != "Degraded: restore incomplete, retrying" {
		t.Fatalf("endpoint-manager %q while its endpoint cannot be programmed", l)
	}
	dp.Fail(nil)
	testenv.Eventually(t, 30*time.Second, func() error {
		if l := level(); l != "OK: endpoints restored" {
			return fmt.Errorf("endpoint-manager %q, want %q: restore incomplete has not cleared", l, "OK: endpoints restored")
		}
		return nil
	})
	if hz, err := c.Healthz(ctx); err != nil || !hz.OK {
		t.Fatalf("healthz after the restore finished: %+v %v", hz, err)
	}
}
