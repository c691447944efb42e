package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
)

// TestPrivilegedAPIRefusesNodeDevicesAndForeignAddresses plays a caller of
// the agent's socket against the real agent and kernel: PUT /v1/endpoint
// naming the node's uplink, loopback, the VXLAN device or a veth whose
// peer is not in another namespace, or an address that IPAM did not give
// the container, is refused whole with a 400 naming the field, and no
// program, route or endpoint appears.
func TestPrivilegedAPIRefusesNodeDevicesAndForeignAddresses(t *testing.T) {
	testenv.Privileged(t) // creates network namespaces, veths and BPF programs
	dir := t.TempDir()
	nodeNS := testenv.NewNetNS(t)
	addUplink(t, nodeNS, "192.168.78.1/24")
	podNS := testenv.NewNetNS(t)
	sock := filepath.Join(dir, "run", "cilium.sock")
	h := startRealAgent(t, []string{"--state-dir=" + filepath.Join(dir, "state"), "--socket-path=" + sock,
		"--bpf-root=" + testnode.TempBPFFS(t), "--prometheus-serve-addr=", "--ipam-pod-cidr=10.201.0.0/24",
		"--node-ipv4=192.168.78.1", "--uplink=eth0", "--routing-mode=tunnel", "--node-netns=" + nodeNS,
		"--enable-health-checking=false"}) // pods' endpoints alone
	t.Cleanup(func() { stopAgent(t, h) })

	// A pod's pair (peer in the pod's namespace) and a pair that stays in
	// the node (no pod behind it).
	inNode := func(fn func() error) {
		t.Helper()
		testenv.InNetNS(t, nodeNS, fn)
	}
	inNode(func() error {
		pod, err := os.Open(podNS)
		if err != nil {
			return err
		}
		defer pod.Close()
		good := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lxcgood"}, PeerName: "eth0",
			PeerNamespace: netlink.NsFd(int(pod.Fd()))}
		if err := netlink.LinkAdd(good); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(good); err != nil {
			return err
		}
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lxcnopod"}, PeerName: "lxcnopodp"})
	})
	index := map[string]int{}
	inNode(func() error {
		for _, name := range []string{"eth0", "lo", "cilium_vxlan", "lxcgood", "lxcnopod"} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			index[name] = l.Attrs().Index
		}
		return nil
	})
	routes := func() int {
		n := 0
		inNode(func() error {
			rs, err := netlink.RouteList(nil, netlink.FAMILY_V4)
			n = len(rs)
			return err
		})
		return n
	}
	routesBefore := routes()

	c := client.New(sock)
	ctx := context.Background()
	mine, err := c.AllocateIP(ctx, "attacker")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := c.AllocateIP(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	req := func(ip, dev string) models.EndpointRequest {
		return models.EndpointRequest{ContainerID: "attacker", IPv4: ip, MAC: "02:00:00:00:00:01", IfName: "eth0",
			HostIfName: dev, HostIfindex: index[dev], NetNSPath: podNS}
	}
	for _, tc := range []struct {
		name  string
		req   models.EndpointRequest
		field string
	}{
		{"the uplink", req(mine.Address, "eth0"), "hostIfName"},
		{"loopback", req(mine.Address, "lo"), "hostIfName"},
		{"the VXLAN device", req(mine.Address, "cilium_vxlan"), "hostIfName"},
		{"a veth with its peer in the node", req(mine.Address, "lxcnopod"), "hostIfName"},
		{"an address of another container", req(theirs.Address, "lxcgood"), "ipv4"},
		{"an address never allocated", req("10.201.0.250", "lxcgood"), "ipv4"},
	} {
		_, err := c.PutEndpoint(ctx, tc.req)
		var apiErr *models.Error
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest || !strings.Contains(apiErr.Message, tc.field+": ") {
			t.Errorf("%s: %v, want 400 naming %s", tc.name, err, tc.field)
		}
	}
	if eps, err := c.Endpoints(ctx); err != nil || len(eps) != 0 {
		t.Fatalf("refused requests left endpoints: %+v %v", eps, err)
	}
	if n := routes(); n != routesBefore {
		t.Fatalf("refused requests changed the node's routes: %d, were %d", n, routesBefore)
	}
	maps, err := c.Maps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.Name == "cilium_lxc" && m.Entries != 0 {
			t.Fatalf("refused requests left %d endpoint map entries", m.Entries)
		}
	}
	// The container's own address on its own pod device is taken.
	if ep, err := c.PutEndpoint(ctx, req(mine.Address, "lxcgood")); err != nil || ep.HostIfName != "lxcgood" {
		t.Fatalf("the container's own address and pod device: %+v %v", ep, err)
	}
	if err := c.DeleteEndpoint(ctx, "attacker"); err != nil {
		t.Fatal(err)
	}
}
