package datapath

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// attachTCX attaches prog to the device's TCX hook, or to one side of a
// netkit pair when at is AttachNetkitPrimary or AttachNetkitPeer (ifindex
// is then the primary's), and pins the link at pin, so that the program
// survives the agent. An existing pinned link on the same device and hook
// is updated in place, which swaps programs atomically; a stale one (its
// device gone or replaced, or another hook) is dropped and attached anew.
// It must run in the device's network namespace.
func attachTCX(pin string, ifindex int, prog *ebpf.Program, at ebpf.AttachType) error {
	if l, err := link.LoadPinnedLink(pin, nil); err == nil {
		info, infoErr := l.Info()
		if infoErr == nil && linkAttachedTo(info, ifindex, at) {
			err = l.Update(prog)
			l.Close()
			if err == nil {
				return nil
			}
		} else {
			l.Close()
		}
		if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale link %s: %w", pin, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("load link %s: %w", pin, err)
	}
	var l link.Link
	var err error
	if isNetkit(at) {
		l, err = link.AttachNetkit(link.NetkitOptions{Interface: ifindex, Program: prog, Attach: at})
	} else {
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: at})
	}
	if err != nil {
		return fmt.Errorf("attach %s to ifindex %d: %w", hookName(at), ifindex, err)
	}
	defer l.Close()
	if err := l.Pin(pin); err != nil {
		return fmt.Errorf("pin link %s: %w", pin, err)
	}
	return nil
}

func isNetkit(at ebpf.AttachType) bool {
	return at == ebpf.AttachNetkitPrimary || at == ebpf.AttachNetkitPeer
}

func hookName(at ebpf.AttachType) string {
	if isNetkit(at) {
		return "netkit"
	}
	return "tcx"
}

// linkAttachedTo tells whether a pinned link is the hook at on ifindex.
func linkAttachedTo(info *link.Info, ifindex int, at ebpf.AttachType) bool {
	if nk := info.Netkit(); nk != nil {
		return isNetkit(at) && int(nk.Ifindex) == ifindex && ebpf.AttachType(nk.AttachType) == at
	}
	if tcx := info.TCX(); tcx != nil {
		return !isNetkit(at) && int(tcx.Ifindex) == ifindex && ebpf.AttachType(tcx.AttachType) == at
	}
	return false
}

// detachTCX removes a pinned link; the program detaches when the last
// reference goes. A missing pin is no error.
func detachTCX(pin string) error {
	if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove link %s: %w", pin, err)
	}
	return nil
}

// attachLegacyTC is the fallback for kernels without TCX (before 6.6): a
// clsact qdisc with a direct-action filter. Filters live as long as the
// device, so they survive the agent without pins. nl must belong to the
// device's namespace.
func attachLegacyTC(nl *netlink.Handle, ifindex int, prog *ebpf.Program, at ebpf.AttachType) error {
	qdisc := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := nl.QdiscReplace(qdisc); err != nil {
		return fmt.Errorf("clsact on ifindex %d: %w", ifindex, err)
	}
	info, err := prog.Info()
	if err != nil {
		return fmt.Errorf("program info: %w", err)
	}
	filter := &netlink.BpfFilter{
		FilterAttrs:  legacyFilterAttrs(ifindex, at),
		Fd:           prog.FD(),
		Name:         info.Name,
		DirectAction: true,
	}
	if err := nl.FilterReplace(filter); err != nil {
		return fmt.Errorf("tc filter on ifindex %d: %w", ifindex, err)
	}
	return nil
}

func legacyFilterAttrs(ifindex int, at ebpf.AttachType) netlink.FilterAttrs {
	parent := uint32(netlink.HANDLE_MIN_EGRESS)
	if at == ebpf.AttachTCXIngress {
		parent = netlink.HANDLE_MIN_INGRESS
	}
	return netlink.FilterAttrs{LinkIndex: ifindex, Parent: parent, Handle: 1, Priority: 1, Protocol: unix.ETH_P_ALL}
}

// detachLegacyTC removes our filter; a device or filter already gone is
// no error.
func detachLegacyTC(nl *netlink.Handle, ifindex int, at ebpf.AttachType) error {
	filter := &netlink.BpfFilter{FilterAttrs: legacyFilterAttrs(ifindex, at)}
	if err := nl.FilterDel(filter); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete tc filter on ifindex %d: %w", ifindex, err)
	}
	return nil
}
