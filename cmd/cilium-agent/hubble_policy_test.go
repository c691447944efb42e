package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/hive/cell"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/hubble"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	k8sclient "github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/monitor"
)

// Hubble's agent events tell of a policy's arrival (POLICY_UPDATED, with
// its rule count and the agent's policy revision) and of its removal
// (POLICY_DELETED, at the next revision), as the agent's policy engine
// applies them.
func TestAgentHubbleTellsOfPolicyChanges(t *testing.T) {
	kube := kubefake.NewClientset()
	dir := t.TempDir()
	hubbleSock := filepath.Join(dir, "run", "hubble.sock")
	clients := &k8sagent.Clients{Kube: kube, Cilium: k8sclient.NewFake()}
	withFakes := cell.Decorate(func(*k8sagent.Clients) *k8sagent.Clients { return clients }, ControlPlane)
	// Hubble without the datapath's events: a monitor that none feed.
	h, err := startHive(t, newHive(newLevel(), Infrastructure, withFakes, memDatapathCell(endpointtest.NewDatapath()),
		cell.Provide(monitor.NewHub), hubble.Cell),
		append(baseArgs(dir), "--k8s-node-name=a", "--enable-hubble", "--hubble-socket-path="+hubbleSock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, h) })
	conn, err := grpc.NewClient("unix://"+hubbleSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hubble := observer.NewObserverClient(conn)

	ctx := context.Background()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "deny-all"}}
	nps := kube.NetworkingV1().NetworkPolicies("shop")
	if _, err := nps.Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var updated *flow.PolicyUpdateNotification
	testenv.Eventually(t, 30*time.Second, func() error {
		evs, err := policyEvents(hubble)
		if err != nil {
			return err
		}
		if len(evs) != 1 || evs[0].Type != flow.AgentEventType_POLICY_UPDATED {
			return fmt.Errorf("policy events %v, want the policy's update", evs)
		}
		updated = evs[0].GetPolicyUpdate()
		return nil
	})
	if updated.RuleCount == 0 || updated.Revision == 0 || !slices.Contains(updated.Labels, "k8s:io.cilium.k8s.policy.name=deny-all") {
		t.Errorf("update %v, want rules, a revision and the policy's name", updated)
	}

	if err := nps.Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		evs, err := policyEvents(hubble)
		if err != nil {
			return err
		}
		if len(evs) != 2 {
			return fmt.Errorf("policy events %v, want the update and the deletion", evs)
		}
		del := evs[1].GetPolicyUpdate()
		if evs[1].Type != flow.AgentEventType_POLICY_DELETED || del.RuleCount != 0 || del.Revision != updated.Revision+1 ||
			!slices.Equal(del.Labels, updated.Labels) {
			return fmt.Errorf("second event %v, want the deletion at revision %d", evs[1], updated.Revision+1)
		}
		return nil
	})
}

// policyEvents are the agent events about policies that Hubble holds.
func policyEvents(c observer.ObserverClient) ([]*flow.AgentEvent, error) {
	stream, err := c.GetAgentEvents(context.Background(), &observer.GetAgentEventsRequest{})
	if err != nil {
		return nil, err
	}
	var out []*flow.AgentEvent
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if ev := resp.GetAgentEvent(); ev.GetPolicyUpdate() != nil {
			out = append(out, ev)
		}
	}
}
