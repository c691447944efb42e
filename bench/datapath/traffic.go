package main

import (
	"net/netip"
	"time"

	"github.com/cilium-go/cilium/bench/internal/traffic"
)

// The tests, on a scenario: bench/internal/traffic does the work, from
// the source namespace to the servers in the destination.

func (s scenario) dial(port int) traffic.Dial {
	return traffic.DialFrom(s.srcNS, netip.AddrPortFrom(s.dst, uint16(port)))
}

func startServers(ns string, addr netip.Addr) (*traffic.Servers, error) {
	return traffic.StartServers(ns, addr, streamPort, echoPort)
}

// streamRate is what the sink received while one connection wrote for d.
func streamRate(s scenario, d time.Duration) (float64, error) {
	return traffic.StreamRate(s.dial(streamPort), s.servers.Received, d)
}

// rrRate is one-byte round trips per second on one connection.
func rrRate(s scenario, d time.Duration) (float64, error) {
	return traffic.RRRate(s.dial(echoPort), d)
}

// crrRate is connect, one-byte round trip and close, per second.
func crrRate(s scenario, d time.Duration) (float64, error) {
	r, err := traffic.RunCRR(s.dial(echoPort), d)
	return r.Rate(), err
}
