package datapath

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// attachTCX attaches prog to the device's TCX hook and pins the link at
// pin, so that the program survives the agent. An existing pinned link on
// the same device is updated in place, which swaps programs atomically;
// a stale one (its device gone or replaced) is dropped and attached anew.
// It must run in the device's network namespace.
func attachTCX(pin string, ifindex int, prog *ebpf.Program, at ebpf.AttachType) error {
	if l, err := link.LoadPinnedLink(pin, nil); err == nil {
		info, infoErr := l.Info()
		if infoErr == nil && info.TCX() != nil && int(info.TCX().Ifindex) == ifindex {
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
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: at})
	if err != nil {
		return fmt.Errorf("attach tcx to ifindex %d: %w", ifindex, err)
	}
	defer l.Close()
	if err := l.Pin(pin); err != nil {
		return fmt.Errorf("pin link %s: %w", pin, err)
	}
	return nil
}

// detachTCX removes a pinned link; the program detaches when the last
// reference goes. A missing pin is no error.
func detachTCX(pin string) error {
	if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove link %s: %w", pin, err)
	}
	return nil
}
