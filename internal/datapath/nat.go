package datapath

import (
	"fmt"
	"os"
	"strings"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// PortRange is the ports Min..Max, both included.
type PortRange struct{ Min, Max uint16 }

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// DefaultEphemeralPorts is Linux's default net.ipv4.ip_local_port_range.
var DefaultEphemeralPorts = PortRange{32768, 60999}

// DefaultNodePorts is Kubernetes' default NodePort range: Services
// listen there on every node.
var DefaultNodePorts = PortRange{30000, 32767}

// MasqueradePortRange is the largest block of ports from 1024 up that
// overlaps neither the node's ephemeral ports nor the NodePort range.
// Source translation (masquerading, and the SNAT of NodePort flows to
// remote backends) takes ports the kernel does not know about: taken from
// the ephemeral range, a translated flow could get the very tuple of a
// node socket's connection to the same remote, and the replies of one
// would go to the other; taken from the NodePort range, a reply to a
// translated flow would look like a client of a NodePort. With Linux's
// defaults it is 1024-29999.
func MasqueradePortRange(ephemeral, nodePorts PortRange) PortRange {
	var best PortRange
	bestLen, start := 0, 1024
	for port := 1024; port <= 65536; port++ {
		// 65536 ends the last block.
		if port < 65536 && !ephemeral.Contains(uint16(port)) && !nodePorts.Contains(uint16(port)) {
			continue
		}
		// port ends the free block start..port-1.
		if n := port - start; n > bestLen {
			best, bestLen = PortRange{uint16(start), uint16(port - 1)}, n
		}
		start = port + 1
	}
	return best
}

// Contains reports whether port is in the range.
func (r PortRange) Contains(port uint16) bool { return port >= r.Min && port <= r.Max }

// EphemeralPorts reads net.ipv4.ip_local_port_range in the network
// namespace at netns ("" for the current one).
func EphemeralPorts(netns string) (PortRange, error) {
	var raw []byte
	err := netnamespace.Do(netns, func() (err error) {
		raw, err = os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
		return err
	})
	if err != nil {
		return PortRange{}, fmt.Errorf("read ip_local_port_range: %w", err)
	}
	var r PortRange
	if _, err := fmt.Sscan(strings.TrimSpace(string(raw)), &r.Min, &r.Max); err != nil {
		return PortRange{}, fmt.Errorf("parse ip_local_port_range %q: %w", raw, err)
	}
	return r, nil
}
