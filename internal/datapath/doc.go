// Package datapath is the kernel-facing half of the agent: it loads the
// eBPF programs compiled from bpf/ (by bpf2go, see generate.go), sets their
// load-time constants, attaches them with pinned TCX links, prepares a
// node's devices and keeps the BPF maps equal to the desired state that the
// control plane hands in.
//
// Nothing above this package imports cilium/ebpf, netlink or x/sys/unix.
// All pins of one node live under Config.BPFFSDir, so several lab nodes
// sharing one kernel never collide.
package datapath
