package datapath

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// TestEnumsHaveGoNames reads the enums from the object's BTF, not from the
// generated Go, so that a value added in C without a Go name (or one the
// Go side spells differently) fails here rather than showing up as
// "reason(200)" in Hubble.
func TestEnumsHaveGoNames(t *testing.T) {
	cs, err := loadLxc()
	must(t, err)
	// String falls back to "prefix(n)" for numbers it has no name for.
	named := func(s fmt.Stringer, unnamedPrefix string) bool {
		return !strings.HasPrefix(s.String(), unnamedPrefix)
	}
	for _, tc := range []struct {
		enum string
		// name reports whether the C value has a Go counterpart.
		name func(name string, v uint64) bool
	}{
		{"drop_reason", func(_ string, v uint64) bool { return named(spec.Reason(v), "reason(") }},
		{"event_type", func(_ string, v uint64) bool { return named(spec.EventType(v), "event(") }},
		{"trace_point", func(_ string, v uint64) bool { return named(spec.TracePoint(v), "point(") }},
		{"ct_status", func(_ string, v uint64) bool {
			switch spec.CTStatus(v) {
			case spec.CTNew, spec.CTEstablished, spec.CTReply, spec.CTRelated, spec.CTInvalid:
				return true
			}
			return false
		}},
		{"policy_verdict", func(_ string, v uint64) bool {
			return named(spec.Verdict(v), "verdict(")
		}},
		// Values the control plane's packages define on their own: the
		// numbers must agree name by name.
		{"traffic_direction", func(name string, v uint64) bool {
			return map[string]spec.Direction{"DIR_INGRESS": spec.Ingress, "DIR_EGRESS": spec.Egress}[name] == spec.Direction(v)
		}},
		{"routing_mode", func(name string, v uint64) bool {
			m, ok := map[string]spec.RoutingMode{"ROUTING_NATIVE": spec.Native, "ROUTING_TUNNEL": spec.Tunnel}[name]
			return ok && m == spec.RoutingMode(v)
		}},
		{"lb_scope", func(name string, v uint64) bool {
			return map[string]spec.LBScope{"LB_SCOPE_EXT": spec.ScopeExternal, "LB_SCOPE_INT": spec.ScopeInternal}[name] == spec.LBScope(v)
		}},
		{"lb_flags", func(name string, v uint64) bool {
			f, ok := map[string]spec.LBFlags{"LB_F_NODEPORT": spec.LBNodePort, "LB_F_EXTERNAL_IP": spec.LBExternalIP,
				"LB_F_HOSTPORT": spec.LBHostPort, "LB_F_LOADBALANCER": spec.LBLoadBalancer, "LB_F_AFFINITY": spec.LBAffinity,
				"LB_F_TWO_SCOPES": spec.LBTwoScopes, "LB_F_LOCAL": spec.LBLocal,
				"LB_F_SOURCE_RANGE": spec.LBSourceRange, "LB_F_MAGLEV": spec.LBMaglev}[name]
			return ok && f == spec.LBFlags(v)
		}},
		{"reserved_identity", func(name string, v uint64) bool {
			id, ok := map[string]identity.NumericIdentity{
				"IDENTITY_ANY": identity.Unknown, "IDENTITY_HOST": identity.Host, "IDENTITY_WORLD": identity.World,
				"IDENTITY_UNMANAGED": identity.Unmanaged, "IDENTITY_INIT": identity.Init,
				"IDENTITY_REMOTE_NODE": identity.RemoteNode, "IDENTITY_SCOPE_LOCAL": identity.LocalIdentityFlag,
			}[name]
			return ok && id == identity.NumericIdentity(v)
		}},
	} {
		var e *btf.Enum
		if err := cs.Types.TypeByName(tc.enum, &e); err != nil {
			t.Errorf("enum %s: %v", tc.enum, err)
			continue
		}
		if len(e.Values) == 0 {
			t.Errorf("enum %s has no values", tc.enum)
		}
		for _, v := range e.Values {
			if !tc.name(v.Name, v.Value) {
				t.Errorf("enum %s: %s = %d has no Go counterpart", tc.enum, v.Name, v.Value)
			}
		}
	}
}
