package spec

import (
	"fmt"
	"net"
	"net/netip"
)

// L2Responder is an address the node answers ARP for on one device: it
// announces a Service's address there (pkg/l2announce).
type L2Responder struct {
	Address netip.Addr
	Ifindex uint32
	// MAC is the device's, which the replies give.
	MAC net.HardwareAddr
}

// L2ResponderEntry is a responder as the kernel holds it, with the
// number of replies it sent.
type L2ResponderEntry struct {
	L2Responder
	Responses uint64
}

// Validate says what is wrong with r, naming the field.
func (r L2Responder) Validate() error {
	switch {
	case !r.Address.Is4():
		return fmt.Errorf("l2 responder %s: only IPv4 is supported", r.Address)
	case r.Ifindex == 0:
		return fmt.Errorf("l2 responder %s: ifindex 0", r.Address)
	case len(r.MAC) != 6:
		return fmt.Errorf("l2 responder %s on %d: MAC %q is not Ethernet's", r.Address, r.Ifindex, r.MAC)
	}
	return nil
}

// Device is a device of the node that the datapath serves.
type Device struct {
	Name    string
	Ifindex uint32
	MAC     net.HardwareAddr
}
