package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestEventTypeFilter(t *testing.T) {
	f := tcpFlow() // drop, 133
	testBuilder(t, eventTypeFilter, []builderCase{
		{name: "type", ff: &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 1}}}, f: f, want: true},
		{name: "sub type ignored", ff: &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 1, SubType: 181}}}, f: f, want: true},
		{name: "sub type", ff: &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 1, MatchSubType: true, SubType: 181}}}, f: f, want: false},
		{name: "other type", ff: &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 4}}}, f: f, want: false},
		{name: "any type", ff: &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 0}}}, f: f, want: true},
		// hubble observe --type l7: the proxies' access log.
		{name: "l7", ff: &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 129}}}, f: l7Flow(), want: true},
		{name: "l7 is no drop", ff: &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 129}}}, f: f, want: false},
	})
}
