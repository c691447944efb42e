package agent

import (
	"maps"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/policy"
)

func cep(id int64, ports ...v2.NamedPort) *v2.CiliumEndpoint {
	c := &v2.CiliumEndpoint{}
	if id != 0 {
		c.Status.Identity = &v2.EndpointIdentity{ID: id}
	}
	c.Status.NamedPorts = ports
	return c
}

// An identity's named ports are the union over the CiliumEndpoints that
// have it, each port once; a change gives those of the identities it
// touched, as they are after it.
func TestNamedPortsAreTheUnionOfAnIdentitysEndpoints(t *testing.T) {
	http := v2.NamedPort{Name: "http", Port: 80, Protocol: "TCP"}
	dns := v2.NamedPort{Name: "dns", Port: 53, Protocol: "UDP"}
	httpPort := policy.NamedPort{Name: "http", Protocol: spec.ProtoTCP, Port: 80}
	dnsPort := policy.NamedPort{Name: "dns", Protocol: spec.ProtoUDP, Port: 53}
	type change struct {
		key     string
		cep     *v2.CiliumEndpoint
		deleted bool
		want    map[identity.NumericIdentity]policy.NamedPorts
	}
	n := namedPorts{}
	for i, c := range []change{
		{"a/web-1", cep(1000, http), false, map[identity.NumericIdentity]policy.NamedPorts{1000: {httpPort}}},
		{"a/web-2", cep(1000, http, dns), false, map[identity.NumericIdentity]policy.NamedPorts{1000: {dnsPort, httpPort}}},
		// No identity yet: nothing changes.
		{"a/web-3", cep(0, dns), false, nil},
		// web-2 moves to 1001: both identities change.
		{"a/web-2", cep(1001, dns), false, map[identity.NumericIdentity]policy.NamedPorts{1000: {httpPort}, 1001: {dnsPort}}},
		{"a/web-1", cep(1000, http), true, map[identity.NumericIdentity]policy.NamedPorts{1000: nil}},
		// Never heard of: nothing to take back.
		{"a/web-9", cep(1000), true, map[identity.NumericIdentity]policy.NamedPorts{}},
	} {
		got := n.apply(c.key, c.cep, c.deleted)
		if !maps.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("change %d (%s): %v, want %v", i, c.key, got, c.want)
		}
	}
}
