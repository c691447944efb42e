package main

import (
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/testenv"
)

// TestPrivilegedFloorCarriesTraffic: the floor's programs are the only way between
// its measured pods, and it works both ways.
func TestPrivilegedFloorCarriesTraffic(t *testing.T) {
	testenv.Privileged(t) // namespaces and BPF programs
	c, err := dptest.New(dptest.Options{Plain: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	a, b := c.Nodes[0].Pods[0], c.Nodes[1].Pods[0]
	for _, p := range []*dptest.Pod{a, b} {
		srv, err := dptest.ServeTCPEcho(p.NS, p.IP, echoPort)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
	}
	unwire, err := wireFloor(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := dptest.TCPEcho(a.NS, b.IP, echoPort); err != nil {
		t.Errorf("%s -> %s through the floor: %v", a.Name, b.Name, err)
	}
	if err := dptest.TCPEcho(b.NS, a.IP, echoPort); err != nil {
		t.Errorf("%s -> %s through the floor: %v", b.Name, a.Name, err)
	}
	if err := unwire(); err != nil {
		t.Fatal(err)
	}
	// Without the programs and the routes they replaced, nothing passes.
	if err := dptest.TCPEcho(a.NS, b.IP, echoPort); err == nil {
		t.Errorf("%s -> %s passed with the floor removed: the floor was not the path", a.Name, b.Name)
	}
}
