package filters

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestCELExpressions(t *testing.T) {
	fwd := &flow.Flow{Verdict: flow.Verdict_FORWARDED, Source: &flow.Endpoint{PodName: "client", Labels: []string{"k8s:app=client"}},
		L4: &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{DestinationPort: 8080}}}}
	drop := &flow.Flow{Verdict: flow.Verdict_DROPPED, DropReasonDesc: flow.DropReason_POLICY_DENIED}
	for _, tc := range []struct {
		exprs          []string
		passFwd, pDrop bool
	}{
		{[]string{"_flow.verdict == Verdict.FORWARDED || _flow.verdict == Verdict.TRANSLATED"}, true, false},
		{[]string{"_flow.verdict == Verdict.DROPPED", `_flow.source.pod_name == "client"`}, true, true},
		{[]string{"_flow.l4.TCP.destination_port == 8080u"}, true, false},
		{[]string{`"k8s:app=client" in _flow.source.labels`}, true, false},
		{[]string{"_flow.drop_reason_desc == DropReason.POLICY_DENIED"}, false, true},
	} {
		s, err := Compile([]*flow.FlowFilter{{Experimental: &flow.FlowFilter_Experimental{CelExpression: tc.exprs}}}, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.exprs, err)
		}
		if s.Pass(fwd) != tc.passFwd || s.Pass(drop) != tc.pDrop {
			t.Errorf("%q: forwarded %v, dropped %v; want %v, %v", tc.exprs, s.Pass(fwd), s.Pass(drop), tc.passFwd, tc.pDrop)
		}
	}
}

func TestCELExpressionErrors(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"_flow.verdict", "want bool"},
		{"_flow.verdict ==", "cel_expression"},
		{"_flow.no_such_field == 1", "no_such_field"},
		{strings.Repeat("true && ", 3000) + "true", "cel_expression"},
	} {
		_, err := Compile([]*flow.FlowFilter{{Experimental: &flow.FlowFilter_Experimental{CelExpression: []string{tc.expr}}}}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40q: %v, want an error naming %s", tc.expr, err, tc.want)
		}
	}
	many := make([]string, celMaxExpressions+1)
	for i := range many {
		many[i] = "true"
	}
	if _, err := Compile([]*flow.FlowFilter{{Experimental: &flow.FlowFilter_Experimental{CelExpression: many}}}, nil); err == nil {
		t.Errorf("%d expressions were taken", len(many))
	}
}

// TestCELCostIsBounded: an expression whose cost on a flow passes the
// limit stops there and does not hold.
func TestCELCostIsBounded(t *testing.T) {
	f := &flow.Flow{Source: &flow.Endpoint{}}
	for i := range 300 {
		f.Source.Labels = append(f.Source.Labels, fmt.Sprintf("k8s:l%d=v", i))
	}
	s, err := Compile([]*flow.FlowFilter{{Experimental: &flow.FlowFilter_Experimental{CelExpression: []string{
		"_flow.source.labels.all(a, _flow.source.labels.all(b, a != b || a == b))"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pass(f) {
		t.Error("an expression of 90,000 comparisons held")
	}
	f.Source.Labels = f.Source.Labels[:3]
	if !s.Pass(f) {
		t.Error("the same expression on 3 labels did not hold")
	}
}

func TestCELFilter(t *testing.T) {
	cel := func(exprs ...string) *flow.FlowFilter {
		return &flow.FlowFilter{Experimental: &flow.FlowFilter_Experimental{CelExpression: exprs}}
	}
	testBuilder(t, celFilter, []builderCase{
		{name: "holds", ff: cel("_flow.verdict == Verdict.DROPPED"), f: tcpFlow(), want: true},
		{name: "one of", ff: cel("false", "_flow.source.identity == 300u"), f: tcpFlow(), want: true},
		{name: "does not hold", ff: cel("_flow.verdict == Verdict.FORWARDED"), f: tcpFlow(), want: false},
		{name: "not boolean", ff: cel("1"), err: "cel_expression"},
	})
}
