package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/pkg/hubble/container"
)

// load is a namespace of workloads that call each other through their
// Services: each workload i calls the next three (i+1..i+3), a tenth of
// the calls are HTTP with their L7 flows, one call in twenty is dropped by
// a deny policy, and every tenth workload calls the world.
type load struct {
	namespace string
	workloads int
	n         uint64
}

// cards is how many cards the map of the load has: the workloads, their
// Services, and the world.
func (l *load) cards() int { return 2*l.workloads + 1 }

func (l *load) endpoint(w, pod int) *flow.Endpoint {
	name := fmt.Sprintf("w%03d", w)
	return &flow.Endpoint{
		ID: uint32(1000 + w), Identity: uint32(20000 + w), Namespace: l.namespace,
		PodName:   fmt.Sprintf("%s-5d8c7b-%d", name, pod),
		Labels:    []string{"k8s:app=" + name, "k8s:io.kubernetes.pod.namespace=" + l.namespace},
		Workloads: []*flow.Workload{{Name: name, Kind: "Deployment"}},
	}
}

// next is the load's next flow, at now.
func (l *load) next(now time.Time, nodeName string) *flow.Flow {
	n := l.n
	l.n++
	src := int(n % uint64(l.workloads))
	call := int(n/uint64(l.workloads)) % 4
	f := &flow.Flow{
		Time: timestamppb.New(now), NodeName: nodeName, Verdict: flow.Verdict_FORWARDED,
		Type: flow.FlowType_L3_L4, EventType: &flow.CiliumEventType{Type: 4}, IsReply: nil,
		Source:           l.endpoint(src, int(n%2)),
		IP:               &flow.IP{Source: fmt.Sprintf("10.0.%d.%d", src/200, src%200+10), IpVersion: flow.IPVersion_IPv4},
		TrafficDirection: flow.TrafficDirection_EGRESS,
		L4:               &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: uint32(30000 + n%30000), DestinationPort: 8080}}},
	}
	if call == 3 && src%10 == 0 {
		f.Destination = &flow.Endpoint{Identity: 2, Labels: []string{"reserved:world"}}
		f.IP.Destination = "192.0.2.1"
		f.DestinationNames = []string{"api.example.test"}
		return f
	}
	dst := (src + 1 + call%3) % l.workloads
	f.Destination = l.endpoint(dst, int(n/2%2))
	f.IP.Destination = fmt.Sprintf("10.1.%d.%d", dst/200, dst%200+10)
	f.DestinationService = &flow.Service{Namespace: l.namespace, Name: fmt.Sprintf("w%03d", dst)}
	switch {
	case n%20 == 7:
		f.Verdict = flow.Verdict_DROPPED
		f.DropReasonDesc = flow.DropReason_POLICY_DENY
		f.EventType = &flow.CiliumEventType{Type: 1}
		f.IngressDeniedBy = []*flow.Policy{{Name: fmt.Sprintf("deny-w%03d", dst), Namespace: l.namespace, Kind: "CiliumNetworkPolicy"}}
	case n%10 == 3:
		f.Type = flow.FlowType_L7
		f.EventType = &flow.CiliumEventType{Type: 129}
		f.L7 = &flow.Layer7{Type: flow.L7FlowType_RESPONSE, LatencyNs: 1_500_000,
			Record: &flow.Layer7_Http{Http: &flow.HTTP{Code: 200, Method: "GET", Url: fmt.Sprintf("http://w%03d:8080/api/items/%d", dst, n%1000)}}}
	default:
		f.IngressAllowedBy = []*flow.Policy{{Name: "allow-bench", Namespace: l.namespace, Kind: "CiliumNetworkPolicy"}}
	}
	return f
}

// run writes rate flows a second, spread over the rings, until ctx
// ends; it returns how many it wrote.
func (l *load) run(ctx context.Context, rate int, nodes []*node) uint64 {
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	var written uint64
	for {
		select {
		case <-ctx.Done():
			return written
		case now := <-t.C:
			// As many as the elapsed time asks for: a late tick catches up.
			due := uint64(now.Sub(start).Seconds() * float64(rate))
			for ; written < due; written++ {
				n := nodes[written%uint64(len(nodes))]
				n.ring.Write(container.Event{Flow: l.next(now, n.name)})
			}
		}
	}
}
