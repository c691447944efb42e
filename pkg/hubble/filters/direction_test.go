package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestDirectionFilter(t *testing.T) {
	testBuilder(t, directionFilter, []builderCase{
		{name: "ingress", ff: &flow.FlowFilter{TrafficDirection: []flow.TrafficDirection{flow.TrafficDirection_INGRESS}}, f: tcpFlow(), want: true},
		{name: "egress", ff: &flow.FlowFilter{TrafficDirection: []flow.TrafficDirection{flow.TrafficDirection_EGRESS}}, f: tcpFlow(), want: false},
	})
}

func TestReplyFilter(t *testing.T) {
	reply := &flow.Flow{Verdict: flow.Verdict_FORWARDED, IsReply: wrapperspb.Bool(true)}
	unknown := &flow.Flow{Verdict: flow.Verdict_FORWARDED}
	testBuilder(t, replyFilter, []builderCase{
		{name: "reply", ff: &flow.FlowFilter{Reply: []bool{true}}, f: reply, want: true},
		{name: "not a request", ff: &flow.FlowFilter{Reply: []bool{false}}, f: reply, want: false},
		{name: "forwarded of unknown direction is neither", ff: &flow.FlowFilter{Reply: []bool{false, true}}, f: unknown, want: false},
		{name: "drop of unknown direction is no reply", ff: &flow.FlowFilter{Reply: []bool{false}}, f: tcpFlow(), want: true},
	})
}
