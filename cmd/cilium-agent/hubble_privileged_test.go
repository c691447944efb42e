package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
)

// TestPrivilegedHubbleServesTheDatapathsFlows runs the real agent with
// --enable-hubble and every pod isolated (--enable-policy=always): a
// connection between two pods is dropped, and Hubble's Observer service
// on the agent's socket shows the drop as a flow naming both endpoints,
// the direction and the reason. The API's monitor, another reader of the
// same events, sees the drop too: the agent hands every event to both.
func TestPrivilegedHubbleServesTheDatapathsFlows(t *testing.T) {
	testenv.Privileged(t) // creates network namespaces, veths and BPF programs
	dir := t.TempDir()
	plugin := buildPlugin(t, dir)
	nodeNS := testenv.NewNetNS(t)
	addUplink(t, nodeNS, "192.168.77.1/24")
	sock := filepath.Join(dir, "run", "cilium.sock")
	hubbleSock := filepath.Join(dir, "run", "hubble.sock")
	h := startRealAgent(t, []string{"--state-dir=" + filepath.Join(dir, "state"), "--socket-path=" + sock,
		"--bpf-root=" + testnode.TempBPFFS(t), "--prometheus-serve-addr=", "--ipam-pod-cidr=10.200.0.0/24",
		"--node-ipv4=192.168.77.1", "--uplink=eth0", "--routing-mode=tunnel", "--node-netns=" + nodeNS,
		"--enable-policy=always", "--enable-hubble", "--hubble-socket-path=" + hubbleSock,
		"--enable-health-checking=false"}) // the pods' flows alone
	t.Cleanup(func() { stopAgent(t, h) })
	rt := newCNIRuntime(t, dir, nodeNS, plugin, sock)
	a, b := &cniPod{id: "pod-a", ns: testenv.NewNetNS(t)}, &cniPod{id: "pod-b", ns: testenv.NewNetNS(t)}
	for _, p := range []*cniPod{a, b} {
		rt.add(p)
		t.Cleanup(func() { rt.del(p) })
	}
	epA, err := client.New(sock).GetEndpoint(context.Background(), a.id)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	monitored := make(chan models.MonitorEvent, 1024)
	go client.New(sock).Monitor(ctx, []string{"drop"}, func(ev models.MonitorEvent) error {
		select {
		case monitored <- ev:
		default:
		}
		return nil
	})

	conn, err := grpc.NewClient("unix://"+hubbleSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hubble := observer.NewObserverClient(conn)
	drops := &observer.GetFlowsRequest{Whitelist: []*flow.FlowFilter{{
		Verdict: []flow.Verdict{flow.Verdict_DROPPED}, SourceIp: []string{a.ip.String()}, DestinationPort: []string{"8080"}}}}
	testenv.Eventually(t, 30*time.Second, func() error {
		if c, err := dptest.DialTCP(a.ns, b.ip, 8080, 200*time.Millisecond); err == nil {
			c.Close()
			return errors.New("pod a reached pod b though every pod is isolated")
		}
		flows, err := allFlows(hubble, drops)
		if err != nil {
			return err
		}
		if len(flows) == 0 {
			return errors.New("no drop from pod a to pod b:8080 in Hubble yet")
		}
		f := flows[len(flows)-1]
		if f.GetIP().GetDestination() != b.ip.String() || f.GetDropReasonDesc() != flow.DropReason_POLICY_DENIED ||
			f.GetTrafficDirection() != flow.TrafficDirection_EGRESS || f.GetSource().GetID() != uint32(epA.ID) ||
			f.GetSource().GetPodName() != a.id || f.GetSource().GetNamespace() != "default" || f.GetNodeName() == "" {
			return fmt.Errorf("the drop's flow: %v", f)
		}
		return nil
	})
	// The monitor's stream may have started after Hubble's drop: drop
	// again until it shows one.
	timeout, again := time.After(30*time.Second), time.NewTicker(500*time.Millisecond)
	defer again.Stop()
	for seen := false; !seen; {
		select {
		case ev := <-monitored:
			seen = ev.Src == a.ip.String() && ev.Dst == b.ip.String() && ev.DstPort == 8080 && ev.Reason == "Policy denied"
		case <-again.C:
			if c, err := dptest.DialTCP(a.ns, b.ip, 8080, 200*time.Millisecond); err == nil {
				c.Close()
			}
		case <-timeout:
			t.Fatal("GET /v1/monitor did not show the drop that Hubble showed")
		}
	}
	st, err := hubble.ServerStatus(context.Background(), &observer.ServerStatusRequest{})
	if err != nil || st.GetSeenFlows() == 0 || st.GetMaxFlows() != 4095 {
		t.Errorf("server status %v, %v", st, err)
	}
}

// allFlows runs a request without following and returns its flows.
func allFlows(c observer.ObserverClient, req *observer.GetFlowsRequest) ([]*flow.Flow, error) {
	stream, err := c.GetFlows(context.Background(), req)
	if err != nil {
		return nil, err
	}
	var out []*flow.Flow
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if f := resp.GetFlow(); f != nil {
			out = append(out, f)
		}
	}
}
