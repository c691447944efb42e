package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// Socket-level balancing (bpf/sock.c): programs on a cgroup v2 directory
// translate the connects and sends of its processes to a service
// frontend into the backend's address, and the peer they read back into
// the frontend's. It serves the node's own processes: a process outside
// the cgroup is not translated.

// SocketPrograms are the loaded socket-level balancing programs, one per
// cgroup hook.
type SocketPrograms struct {
	Connect4     *ebpf.Program
	Sendmsg4     *ebpf.Program
	Recvmsg4     *ebpf.Program
	Getpeername4 *ebpf.Program
}

// Close releases the programs; attached links keep them alive.
func (p *SocketPrograms) Close() error {
	return errors.Join(p.Connect4.Close(), p.Sendmsg4.Close(), p.Recvmsg4.Close(), p.Getpeername4.Close())
}

// socketHooks are the cgroup hooks and the program each gets; pin is the
// link's pin name in the node's links directory.
var socketHooks = []struct {
	pin  string
	at   ebpf.AttachType
	prog func(*SocketPrograms) *ebpf.Program
}{
	{"sock_connect4", ebpf.AttachCGroupInet4Connect, func(p *SocketPrograms) *ebpf.Program { return p.Connect4 }},
	{"sock_sendmsg4", ebpf.AttachCGroupUDP4Sendmsg, func(p *SocketPrograms) *ebpf.Program { return p.Sendmsg4 }},
	{"sock_recvmsg4", ebpf.AttachCGroupUDP4Recvmsg, func(p *SocketPrograms) *ebpf.Program { return p.Recvmsg4 }},
	{"sock_getpeername4", ebpf.AttachCgroupInet4GetPeername,
		func(p *SocketPrograms) *ebpf.Program { return p.Getpeername4 }},
}

// SocketOptions are what the socket programs are loaded with.
type SocketOptions struct {
	// HostNetNS is the cookie of the node's network namespace (NetNSCookie):
	// only its processes reach the frontends at loopback addresses.
	HostNetNS uint64
	// NodeIPv4 is the address the node's unbound sockets send from,
	// which frontends with source ranges judge them by.
	NodeIPv4 netip.Addr
	// Traces: the programs record the calls they translate
	// (EventTraceSock).
	Traces bool
}

// LoadSocketPrograms loads the socket-level balancing programs against
// the node's maps.
func LoadSocketPrograms(maps *Maps, o SocketOptions) (*SocketPrograms, error) {
	cs, err := loadSock()
	if err != nil {
		return nil, fmt.Errorf("load sock spec: %w", err)
	}
	var vs sockVariableSpecs
	if err := cs.Assign(&vs); err != nil {
		return nil, fmt.Errorf("sock constants: %w", err)
	}
	if err := errors.Join(setVar(vs.TRACE_ENABLED, boolU8(o.Traces))(),
		setVar(vs.HOST_NETNS_COOKIE, o.HostNetNS)(), setVar(vs.NODE_IPV4, as4(o.NodeIPv4))()); err != nil {
		return nil, fmt.Errorf("socket programs: %w", err)
	}
	var objs struct {
		Connect4     *ebpf.Program `ebpf:"cil_sock4_connect"`
		Sendmsg4     *ebpf.Program `ebpf:"cil_sock4_sendmsg"`
		Recvmsg4     *ebpf.Program `ebpf:"cil_sock4_recvmsg"`
		Getpeername4 *ebpf.Program `ebpf:"cil_sock4_getpeername"`
	}
	opts, err := maps.useIn(cs)
	if err != nil {
		return nil, fmt.Errorf("socket programs: %w", err)
	}
	if err := cs.LoadAndAssign(&objs, opts); err != nil {
		return nil, fmt.Errorf("load socket programs: %w", err)
	}
	return &SocketPrograms{Connect4: objs.Connect4, Sendmsg4: objs.Sendmsg4, Recvmsg4: objs.Recvmsg4,
		Getpeername4: objs.Getpeername4}, nil
}

// AttachSocketLB loads the socket programs against maps and attaches them
// to the cgroup v2 directory cgroupPath, with links pinned in linksDir so
// that they outlive the agent. Attaching again (an agent restart, a new
// datapath version) swaps the programs of the pinned links in place, so a
// hook never has two programs nor a moment with none; links to another
// cgroup than cgroupPath are replaced.
func AttachSocketLB(maps *Maps, linksDir, cgroupPath string, o SocketOptions) error {
	cgroupID, err := cgroup2ID(cgroupPath)
	if err != nil {
		return err
	}
	progs, err := LoadSocketPrograms(maps, o)
	if err != nil {
		return err
	}
	defer progs.Close()
	for _, h := range socketHooks {
		if err := attachCgroup(filepath.Join(linksDir, h.pin), cgroupPath, cgroupID, h.prog(progs), h.at); err != nil {
			return err
		}
	}
	return nil
}

// DetachSocketLB takes the programs off the cgroup and removes the links
// AttachSocketLB pinned in linksDir. Missing pins are no error.
func DetachSocketLB(linksDir string) error {
	var errs []error
	for _, h := range socketHooks {
		pin := filepath.Join(linksDir, h.pin)
		// Removing the pin alone would detach later, when the kernel
		// releases the link, and never while someone holds it: a
		// detach must be done when it returns.
		if l, err := link.LoadPinnedLink(pin, nil); err == nil {
			if err := l.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
				errs = append(errs, fmt.Errorf("detach link %s: %w", pin, err))
			}
			l.Close()
		}
		if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove link %s: %w", pin, err))
		}
	}
	return errors.Join(errs...)
}

// Cgroup2Root is where the cgroup v2 hierarchy is mounted: alone at
// /sys/fs/cgroup, or beside v1 at /sys/fs/cgroup/unified.
func Cgroup2Root() (string, error) {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var fs unix.Statfs_t
		if unix.Statfs(dir, &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
			return dir, nil
		}
	}
	return "", errors.New("no cgroup v2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified")
}

// cgroup2ID is the id of the cgroup v2 directory at path, which is its
// inode number on cgroupfs.
func cgroup2ID(path string) (uint64, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", path, err)
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return 0, fmt.Errorf("cgroup %s: not a cgroup v2 directory", path)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", path, err)
	}
	return st.Ino, nil
}

// attachCgroup attaches prog to the cgroup's hook at with a link pinned at
// pin, updating the pinned link in place when it is already that hook of
// that cgroup (see attachTCX).
func attachCgroup(pin, cgroupPath string, cgroupID uint64, prog *ebpf.Program, at ebpf.AttachType) error {
	if l, err := link.LoadPinnedLink(pin, nil); err == nil {
		info, infoErr := l.Info()
		if infoErr == nil && cgroupLinkAttachedTo(info, cgroupID, at) {
			err = l.Update(prog)
			l.Close()
			if err == nil {
				return nil
			}
		} else {
			// Another cgroup's (the configuration changed): its
			// processes must not keep being translated.
			err := l.Detach()
			l.Close()
			if err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
				return fmt.Errorf("detach stale link %s: %w", pin, err)
			}
		}
		if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale link %s: %w", pin, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("load link %s: %w", pin, err)
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: at, Program: prog})
	if err != nil {
		return fmt.Errorf("attach %s to cgroup %s: %w", at, cgroupPath, err)
	}
	defer l.Close()
	if err := l.Pin(pin); err != nil {
		return fmt.Errorf("pin link %s: %w", pin, err)
	}
	return nil
}

func cgroupLinkAttachedTo(info *link.Info, cgroupID uint64, at ebpf.AttachType) bool {
	cg := info.Cgroup()
	return cg != nil && cg.CgroupId == cgroupID && ebpf.AttachType(cg.AttachType) == at
}

// AttachSocketLB attaches socket-level balancing to the cgroup v2
// directory cgroupPath (see the package function); valid after Start.
func (n *Node) AttachSocketLB(cgroupPath string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.attachSocketLB(cgroupPath)
}

func (n *Node) attachSocketLB(cgroupPath string) error {
	maps := n.maps.Load()
	if maps == nil {
		return fmt.Errorf("attach socket LB: %w", ErrNotStarted)
	}
	cookie, err := NetNSCookie(n.cfg.NetNS)
	if err != nil {
		return fmt.Errorf("attach socket LB: the node's network namespace: %w", err)
	}
	return AttachSocketLB(maps, n.linksDir(), cgroupPath, SocketOptions{HostNetNS: cookie, NodeIPv4: n.cfg.NodeIPv4,
		Traces: n.cfg.Traces.Enabled})
}

// DetachSocketLB removes socket-level balancing from the cgroup it was
// attached to.
func (n *Node) DetachSocketLB() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.detachSocketLB()
}

func (n *Node) detachSocketLB() error {
	return DetachSocketLB(n.linksDir())
}

// NetNSCookie is the kernel's cookie of the network namespace at path
// (the one in socket traces, EventTraceSock): what a socket made there
// reads as SO_NETNS_COOKIE.
func NetNSCookie(path string) (uint64, error) {
	var cookie uint64
	err := netnamespace.Do(path, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("network namespace cookie of %s: %w", path, err)
	}
	return cookie, nil
}

// SockTranslated says whether socket-level balancing translated a socket
// that it still remembers: whether its reverse map holds an entry.
func (m *Maps) SockTranslated() (bool, error) {
	k, v := make([]byte, m.LB4ReverseSock.KeySize()), make([]byte, m.LB4ReverseSock.ValueSize())
	it := m.LB4ReverseSock.Iterate()
	if it.Next(k, v) {
		return true, nil
	}
	if err := it.Err(); err != nil {
		return false, fmt.Errorf("socket reverse map: %w", err)
	}
	return false, nil
}
