package datapath

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

var macNext2 = net.HardwareAddr{2, 0, 0, 0, 0, 3}

// pinCPU keeps the test's locked thread on one CPU: the cache is per
// CPU, and BPF_PROG_RUN runs on the caller's.
func pinCPU(t *testing.T) {
	t.Helper()
	var old, one unix.CPUSet
	must(t, unix.SchedGetaffinity(0, &old))
	for cpu := range 1024 {
		if old.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	must(t, unix.SchedSetaffinity(0, &one))
	t.Cleanup(func() { must(t, unix.SchedSetaffinity(0, &old)) })
}

// moveNextHop gives the next hop a new MAC behind the programs' back.
func (e *env) moveNextHop(t *testing.T) {
	t.Helper()
	must(t, netlink.NeighSet(&netlink.Neigh{
		LinkIndex: e.uplinkIfindex, IP: remoteIP.AsSlice(), HardwareAddr: macNext2,
		State: netlink.NUD_PERMANENT, Family: netlink.FAMILY_V4,
	}))
}

// routedMAC is the destination MAC a new connection from A to C leaves with.
func (e *env) routedMAC(t *testing.T, sport uint16) net.HardwareAddr {
	t.Helper()
	out := e.expect(e.fromContainer, tcp(ipA, ipC, sport, 80, "S").frame(t), actRedirect)
	return net.HardwareAddr(out[0:6])
}

// pollMAC sends until the packets leave for want or the deadline passes.
func (e *env) pollMAC(t *testing.T, want net.HardwareAddr, deadline time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	for sport := uint16(41000); ; sport++ {
		got := e.routedMAC(t, sport)
		if bytes.Equal(got, want) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("next hop MAC still %v after %v, want %v", got, deadline, want)
		}
	}
}

func TestPrivilegedProgRouteCache(t *testing.T) {
	cases := []progCase{
		{"a cached answer serves until the generation moves", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			if got := e.routedMAC(t, 40000); !bytes.Equal(got, macNext) {
				t.Fatalf("next hop MAC %v, want %v", got, macNext)
			}
			e.moveNextHop(t)
			// Cached: no FIB lookup saw the change.
			if got := e.routedMAC(t, 40001); !bytes.Equal(got, macNext) {
				t.Fatalf("next hop MAC %v, want the cached %v", got, macNext)
			}
			must(t, e.maps.InvalidateRoutes())
			if got := e.routedMAC(t, 40002); !bytes.Equal(got, macNext2) {
				t.Fatalf("next hop MAC %v after invalidation, want %v", got, macNext2)
			}
		}},
		{"a cached answer expires without invalidation", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			e.routedMAC(t, 40000)
			e.moveNextHop(t)
			e.pollMAC(t, macNext2, 3*time.Second)
		}},
		{"the route watch invalidates on neighbour and route changes", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			watching, err := watchRoutes(ctx, "", e.maps, slog.New(slog.DiscardHandler))
			must(t, err)
			// The maps close when the case ends: the watch must end first.
			t.Cleanup(func() { cancel(); <-watching })
			e.routedMAC(t, 40000)
			gen, err := e.maps.RouteGeneration()
			must(t, err)
			e.moveNextHop(t)
			end := time.Now().Add(2 * time.Second)
			for {
				now, err := e.maps.RouteGeneration()
				must(t, err)
				if now != gen {
					break
				}
				if time.Now().After(end) {
					t.Fatal("route generation did not move after a neighbour change")
				}
				time.Sleep(time.Millisecond)
			}
			if got := e.routedMAC(t, 40001); !bytes.Equal(got, macNext2) {
				t.Fatalf("next hop MAC %v, want %v", got, macNext2)
			}
		}},
		{"the cache is keyed by source and destination", envOpts{mode: spec.Native}, func(t *testing.T, e *env) {
			e.routedMAC(t, 40000)
			// The world is routed too, and must not take C's answer.
			out := e.expect(e.fromContainer, udp(ipA, ipWorld, 5000, 53).frame(t), actRedirect)
			if ip, _ := decoded(t, out); !bytes.Equal(out[0:6], macNext) || !ip.DstIP.Equal(ipWorld.AsSlice()) {
				t.Fatalf("world packet %x", out[:34])
			}
		}},
	}
	for i := range cases {
		run := cases[i].run
		cases[i].run = func(t *testing.T, e *env) { pinCPU(t); run(t, e) }
	}
	runProgCases(t, cases)
}
