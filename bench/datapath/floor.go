package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// wireFloor turns a plain cluster into the floor, scenario (f): the pods
// measured (the first on each node) send and receive through the bare
// redirects of bpf/bench/veth_floor.c. The nodes lose their routes to each
// other's pod CIDR, so the floor is the only way between those pods: a
// floor that did not work would fail the benchmark, not measure kernel
// routing. It returns what detaches and unloads the programs again.
func wireFloor(c *dptest.Cluster) (func() error, error) {
	var closers []func() error
	undo := func() error {
		var errs []error
		for _, f := range closers {
			errs = append(errs, f())
		}
		return errors.Join(errs...)
	}
	attach := func(ns string, at int, prog string, vars floorVars) error {
		close, err := attachFloor(ns, at, prog, vars)
		if err == nil {
			closers = append(closers, close)
		}
		return err
	}
	for i, n := range c.Nodes {
		pod, peer := n.Pods[0], c.Nodes[(i+1)%len(c.Nodes)]
		uplink, err := deviceOf(n.NS, "eth0")
		if err != nil {
			return nil, errors.Join(err, undo())
		}
		peerUplink, err := deviceOf(peer.NS, "eth0")
		if err != nil {
			return nil, errors.Join(err, undo())
		}
		host, err := deviceOf(n.NS, pod.HostDevice)
		if err != nil {
			return nil, errors.Join(err, undo())
		}
		out := floorVars{ifindex: uplink.Index, dst: peerUplink.HardwareAddr, src: uplink.HardwareAddr}
		if err := attach(n.NS, host.Index, "floor_out", out); err != nil {
			return nil, errors.Join(err, undo())
		}
		in := floorVars{ifindex: host.Index, pod: pod.IP.As4(), dst: pod.MAC, src: host.HardwareAddr}
		if err := attach(n.NS, uplink.Index, "floor_in", in); err != nil {
			return nil, errors.Join(err, undo())
		}
		err = netnamespace.Do(n.NS, func() error {
			return netlink.RouteDel(&netlink.Route{Dst: &net.IPNet{IP: peer.CIDR.Addr().AsSlice(),
				Mask: net.CIDRMask(peer.CIDR.Bits(), 32)}})
		})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("route %s -> %s: %w", n.Name, peer.Name, err), undo())
		}
	}
	return undo, nil
}

// floorVars are the constants of one floor program.
type floorVars struct {
	ifindex  int
	pod      [4]byte
	dst, src net.HardwareAddr
}

func deviceOf(ns, name string) (attrs *netlink.LinkAttrs, err error) {
	err = netnamespace.Do(ns, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return fmt.Errorf("device %s: %w", name, err)
		}
		attrs = l.Attrs()
		return nil
	})
	return attrs, err
}

// attachFloor loads one floor program with its constants and attaches it
// at the TCX ingress of device at in namespace ns.
func attachFloor(ns string, at int, prog string, v floorVars) (func() error, error) {
	spec, err := loadFloor()
	if err != nil {
		return nil, err
	}
	var vs floorVariableSpecs
	if err := spec.Assign(&vs); err != nil {
		return nil, fmt.Errorf("floor constants: %w", err)
	}
	for _, c := range []struct {
		v     *ebpf.VariableSpec
		value any
	}{
		{vs.OUT_IFINDEX, uint32(v.ifindex)},
		{vs.POD_IPV4, v.pod},
		{vs.DST_MAC, [6]byte(v.dst)},
		{vs.SRC_MAC, [6]byte(v.src)},
	} {
		if err := c.v.Set(c.value); err != nil {
			return nil, fmt.Errorf("floor constant %s: %w", c.v.Name, err)
		}
	}
	var objs floorObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("load floor: %w", err)
	}
	p := map[string]*ebpf.Program{"floor_out": objs.FloorOut, "floor_in": objs.FloorIn}[prog]
	var l link.Link
	err = netnamespace.Do(ns, func() (err error) {
		l, err = link.AttachTCX(link.TCXOptions{Interface: at, Program: p, Attach: ebpf.AttachTCXIngress})
		return err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("attach %s: %w", prog, err), objs.Close())
	}
	return func() error { return errors.Join(l.Close(), objs.Close()) }, nil
}
