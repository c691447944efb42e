package datapath

import (
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// ErrSockDestroyUnsupported says the kernel cannot end sockets from BPF
// (bpf_sock_destroy and socket iterators, Linux 6.5).
var ErrSockDestroyUnsupported = errors.New("kernel cannot destroy sockets from BPF (needs Linux 6.5)")

// DestroySocketsTo ends the UDP sockets that socket-level balancing
// connected to backend, in the network namespace at netns ("" is the
// caller's), and returns how many it ended. A connected UDP socket picks
// its backend once, at connect: when the backend goes, the control plane
// calls this so that the application sees ECONNABORTED on its next
// receive and connects again, to a live backend. Sockets that the
// programs did not translate (connected to the backend's address
// directly) are left alone.
//
// A socket iterator walks the sockets of the namespace it is opened in,
// so a cgroup whose processes use several namespaces needs one call per
// namespace. TCP needs nothing: a connection to a backend that is gone
// ends by itself (reset or timeout), and the next connect is balanced.
func (m *Maps) DestroySocketsTo(netns string, backend netip.AddrPort, proto uint8) (int, error) {
	if proto != spec.ProtoUDP {
		return 0, fmt.Errorf("destroy sockets to %s: protocol %d: only UDP sockets are destroyed", backend, proto)
	}
	if !backend.Addr().Is4() || backend.Port() == 0 {
		return 0, fmt.Errorf("destroy sockets to %s: want an IPv4 address and a port", backend)
	}
	cs, err := loadSock()
	if err != nil {
		return 0, fmt.Errorf("load sock spec: %w", err)
	}
	var vs sockVariableSpecs
	if err := cs.Assign(&vs); err != nil {
		return 0, fmt.Errorf("sock constants: %w", err)
	}
	if err := setAll(setVar(vs.DESTROY_ADDRESS, backend.Addr().As4()), setVar(vs.DESTROY_PORT, htons(backend.Port()))); err != nil {
		return 0, err
	}
	var objs struct {
		Destroy *ebpf.Program `ebpf:"cil_sock4_destroy_udp"`
	}
	opts, err := m.useIn(cs)
	if err != nil {
		return 0, err
	}
	if err := cs.LoadAndAssign(&objs, opts); err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) {
			return 0, fmt.Errorf("%w: %w", ErrSockDestroyUnsupported, err)
		}
		return 0, fmt.Errorf("load socket destroy iterator: %w", err)
	}
	defer objs.Destroy.Close()
	var out []byte
	err = netnamespace.Do(netns, func() error {
		it, err := link.AttachIter(link.IterOptions{Program: objs.Destroy})
		if err != nil {
			return fmt.Errorf("attach socket destroy iterator: %w", err)
		}
		defer it.Close()
		// The iterator walks the namespace of the thread that opens it.
		rd, err := it.Open()
		if err != nil {
			return fmt.Errorf("open socket destroy iterator: %w", err)
		}
		defer rd.Close()
		out, err = io.ReadAll(rd)
		if err != nil {
			return fmt.Errorf("run socket destroy iterator: %w", err)
		}
		return nil
	})
	// The program writes the cookie (8 bytes) of every socket it ended.
	return len(out) / 8, err
}

// DestroySocketsTo is Maps.DestroySocketsTo in the node's namespace.
func (n *Node) DestroySocketsTo(backend netip.AddrPort, proto uint8) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	maps := n.maps.Load()
	if maps == nil {
		return 0, fmt.Errorf("destroy sockets: %w", ErrNotStarted)
	}
	return maps.DestroySocketsTo(n.cfg.NetNS, backend, proto)
}
