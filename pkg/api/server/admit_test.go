package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/pkg/api/models"
)

// TestPutEndpointRefusesWhatIsNotTheContainers plays a caller of the
// socket that names an address or a device that is not the container's.
// Each request is refused whole, with a 400 naming the field, and leaves
// no endpoint behind.
func TestPutEndpointRefusesWhatIsNotTheContainers(t *testing.T) {
	f := newFixture(t)
	var mine, theirs models.IPAMResponse
	f.do(t, "POST", "/v1/ipam", `{"owner":"abc"}`, &mine)
	f.do(t, "POST", "/v1/ipam", `{"owner":"other"}`, &theirs)
	body := func(tweak func(*models.EndpointRequest)) string {
		r := models.EndpointRequest{ContainerID: "abc", IPv4: mine.Address, MAC: "02:00:00:00:00:01",
			IfName: "eth0", HostIfName: "lxcabc", HostIfindex: 7, NetNSPath: "/run/netns/p"}
		tweak(&r)
		b, _ := json.Marshal(r)
		return string(b)
	}
	for _, tc := range []struct {
		name  string
		tweak func(*models.EndpointRequest)
		want  string
	}{
		{"an address of another container", func(r *models.EndpointRequest) { r.IPv4 = theirs.Address }, "ipv4: "},
		{"an address never allocated", func(r *models.EndpointRequest) { r.IPv4 = "10.0.1.200" }, "ipv4: "},
		{"an address outside the pod CIDR", func(r *models.EndpointRequest) { r.IPv4 = "192.168.0.1" }, "ipv4: "},
		{"the uplink", func(r *models.EndpointRequest) { r.HostIfName = "eth0"; r.HostIfindex = 2 }, "hostIfName: "},
		{"loopback", func(r *models.EndpointRequest) { r.HostIfName = "lo"; r.HostIfindex = 1 }, "hostIfName: "},
		{"the tunnel device", func(r *models.EndpointRequest) { r.HostIfName = "cilium_vxlan"; r.HostIfindex = 3 }, "hostIfName: "},
		{"a pod device under another index", func(r *models.EndpointRequest) { r.HostIfindex = 8 }, "hostIfName: "},
	} {
		var e models.Error
		code := f.do(t, "PUT", "/v1/endpoint/container-id:abc", body(tc.tweak), &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Message, "bad request: "+tc.want) {
			t.Errorf("%s: %d %+v, want 400 naming %q", tc.name, code, e, tc.want)
		}
	}
	if eps := f.eps.List(); len(eps) != 0 {
		t.Fatalf("refused requests left endpoints: %+v", eps)
	}
	if got := f.ipam.List(); len(got) != 2 || got[0].Owner != "abc" || got[1].Owner != "other" {
		t.Fatalf("refused requests changed IPAM: %+v", got)
	}
	var ep models.Endpoint
	if code := f.do(t, "PUT", "/v1/endpoint/container-id:abc", body(func(*models.EndpointRequest) {}), &ep); code != http.StatusCreated {
		t.Fatalf("the container's own address and device: %d", code)
	}
}

// TestServerTimeouts: a client that trickles its request or idles on a
// connection does not hold the agent's resources for ever.
func TestServerTimeouts(t *testing.T) {
	p := newFixture(t).s.p
	p.Lifecycle = &cell.DefaultLifecycle{}
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	if srv := s.http; srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: header %v, read %v, idle %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
	}
}
