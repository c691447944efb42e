package nodedatapath

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/healthcheck"
	"github.com/cilium-go/cilium/pkg/paths"
)

// healthDatapath opens health checking's sockets in the node's namespace
// and makes the health endpoint's namespace and device pair.
type healthDatapath struct {
	n      *datapath.Node
	nodeNS string
	nodeIP netip.Addr
	// netns is where the health endpoint's namespace is pinned: beside
	// the agent's socket, under netns/.
	netns string
}

func newHealthDatapath(n *datapath.Node, c Config, p paths.Config) healthcheck.Datapath {
	ip, _ := netip.ParseAddr(c.NodeIPv4) // the datapath checked it
	return &healthDatapath{n: n, nodeNS: c.NodeNetNS, nodeIP: ip,
		netns: filepath.Join(filepath.Dir(p.SocketPath), "netns", healthcheck.EndpointID)}
}

func (h *healthDatapath) NodeIPv4() netip.Addr { return h.nodeIP }

func (h *healthDatapath) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return netnamespace.DialContext(ctx, h.nodeNS, network, addr)
}

func (h *healthDatapath) ListenICMP() (net.PacketConn, error) {
	return netnamespace.ListenPacket(h.nodeNS, "ip4:icmp", "0.0.0.0")
}

func (h *healthDatapath) ListenNode(addr string) (net.Listener, error) {
	return netnamespace.Listen(h.nodeNS, "tcp", addr)
}

func (h *healthDatapath) ListenHealth(addr string) (net.Listener, error) {
	return netnamespace.Listen(h.netns, "tcp", addr)
}

func (h *healthDatapath) link(ip netip.Addr) (datapath.HealthLink, error) {
	mtu := 0
	if ip.IsValid() {
		var err error
		if mtu, err = h.n.PodMTU(); err != nil {
			return datapath.HealthLink{}, err
		}
	}
	return datapath.HealthLink{NodeNetNS: h.nodeNS, NetNS: h.netns, IPv4: ip, MTU: mtu}, nil
}

func (h *healthDatapath) CreateHealthLink(ip netip.Addr) (healthcheck.Link, error) {
	l, err := h.link(ip)
	if err != nil {
		return healthcheck.Link{}, err
	}
	if err := os.MkdirAll(filepath.Dir(h.netns), 0o750); err != nil {
		return healthcheck.Link{}, err
	}
	res, err := l.Create()
	if err != nil {
		return healthcheck.Link{}, err
	}
	return healthcheck.Link{NetNS: h.netns, IfName: datapath.HealthIfName, MAC: res.PodMAC.String(),
		HostIfName: datapath.HealthHostIfName, HostIfindex: res.HostIfindex}, nil
}

func (h *healthDatapath) RemoveHealthLink() error {
	l, _ := h.link(netip.Addr{})
	return l.Remove()
}
