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

// The API explains the agent's own policy engine: its wiring, and the
// engine's answers as the API shows them.
func TestAgentExplainsPolicy(t *testing.T) {
	dir := t.TempDir()
	h, err := startAgent(t, endpointtest.NewDatapath(), baseArgs(dir)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, h) })
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
	// Without Kubernetes there are no rules but the health endpoint's
	// own; the endpoint is not isolated.
	if rules, err := c.PolicyRules(ctx); err != nil || len(rules) != 1 || rules[0].Origin.String() != "builtin/health-endpoint" {
		t.Fatalf("rules: %+v %v", rules, err)
	}
	if p, err := c.Policy(ctx); err != nil || p.Revision != 1 {
		t.Fatalf("policy: %+v %v", p, err)
	}
	if _, err := c.PolicySelectors(ctx); err != nil {
		t.Fatalf("selectors: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		ep, err := c.GetEndpointByID(ctx, 1)
		if err != nil {
			return err
		}
		// Policy revision 1: no policy change yet, and the endpoint enforces it.
		if p := ep.Policy; p == nil || p.Revision == 0 || p.Realized != p.Revision || p.PolicyRevision != 1 ||
			p.EnforceIngress || p.EnforceEgress {
			return fmt.Errorf("endpoint policy %+v", p)
		}
		return nil
	})
	tr, err := c.PolicyTrace(ctx, "1", "k8s:app=web", "tcp", 80)
	if err != nil || !tr.Allowed || tr.Source.Identity != 1 || tr.Destination.Identity != 0 || tr.Protocol != "tcp" {
		t.Fatalf("trace: %+v %v", tr, err)
	}
	// A pod needs Kubernetes: the error is the client's, naming the side.
	_, err = c.PolicyTrace(ctx, "1", "prod/web", "tcp", 80)
	var e *models.Error
	if !errors.As(err, &e) || e.Code != 400 || e.Message != "dst: pods need Kubernetes" {
		t.Fatalf("trace to a pod: %v", err)
	}
}
