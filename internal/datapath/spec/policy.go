package spec

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"strconv"

	"github.com/cilium-go/cilium/pkg/identity"
)

// Direction of traffic as seen by an endpoint.
type Direction uint8

const (
	Ingress Direction = 1
	Egress  Direction = 2
)

func (d Direction) String() string {
	switch d {
	case Ingress:
		return "ingress"
	case Egress:
		return "egress"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// IP protocols whose ports (for ICMP, the type) the datapath reads.
const (
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
	ProtoSCTP = 132
)

// PolicyGroup is the part of an endpoint's policy about one remote
// identity in one direction. The datapath's keys of a group depend only
// on the group's entries (a deny overrides only allows of its own
// identity), so a group is written on its own.
type PolicyGroup struct {
	EndpointID uint16
	Direction  Direction
	Identity   identity.NumericIdentity
}

// PortPrefix is a block of 2^(16-Bits) ports starting at Port.
type PortPrefix struct {
	Port uint16
	Bits int
}

// PortPrefixes covers lo..hi exactly with the fewest aligned blocks, which
// is how a range becomes longest-prefix-match keys.
func PortPrefixes(lo, hi uint16) []PortPrefix {
	var out []PortPrefix
	for l := uint32(lo); l <= uint32(hi); {
		size := uint32(1) << 16
		if l != 0 {
			size = uint32(1) << bits.TrailingZeros32(l)
		}
		for l+size-1 > uint32(hi) {
			size >>= 1
		}
		out = append(out, PortPrefix{Port: uint16(l), Bits: 16 - bits.TrailingZeros32(size)})
		l += size
	}
	return out
}

// Keys is how many keys of the datapath's policy map e takes: one, or
// one per aligned block of its port range.
func (e PolicyEntry) Keys() int {
	if e.Protocol == 0 || e.Port == 0 {
		return 1
	}
	return len(PortPrefixes(e.Port, max(e.EndPort, e.Port)))
}

// Group is the group e belongs to in endpoint ep's policy.
func (e PolicyEntry) Group(ep uint16) PolicyGroup {
	return PolicyGroup{EndpointID: ep, Direction: e.Direction, Identity: e.Identity}
}

// PolicyEntry is one rule of an endpoint's policy as the datapath sees
// it: who (remote identity), which way, and what (protocol and ports).
type PolicyEntry struct {
	Direction Direction
	// Identity is the remote identity; identity.Unknown (0) matches every
	// identity.
	Identity identity.NumericIdentity
	// Protocol is an IP protocol number; 0 matches every protocol (and
	// then the ports must be 0).
	Protocol uint8
	// Port is the destination port (the type for ICMP); 0 matches every
	// port. EndPort, when above Port, makes the rule cover Port..EndPort.
	Port    uint16
	EndPort uint16
	Deny    bool
	// ProxyPort is kept in the entry for the L7 proxy to come.
	ProxyPort uint16
	// Cookie names the rules behind the entry: the datapath's policy
	// verdict events carry the deciding entry's, which the agent
	// resolves. It is not part of what the entry matches.
	Cookie uint32
}

func (e PolicyEntry) String() string {
	verb := "allow"
	if e.Deny {
		verb = "deny"
	}
	return fmt.Sprintf("%s %s identity %d protocol %d ports %d-%d", verb, e.Direction, e.Identity, e.Protocol, e.Port, e.EndPort)
}

// Validate names what the datapath cannot express about e.
func (e PolicyEntry) Validate() error {
	if e.Direction != Ingress && e.Direction != Egress {
		return fmt.Errorf("bad direction %d", e.Direction)
	}
	if e.Protocol == 0 && (e.Port != 0 || e.EndPort != 0) {
		return errors.New("ports need a protocol")
	}
	if e.EndPort != 0 && e.Port == 0 {
		// Port 0 is every port: the range would cover them all.
		return fmt.Errorf("end port %d without a start port", e.EndPort)
	}
	if e.EndPort != 0 && e.EndPort < e.Port {
		return fmt.Errorf("end port %d below port %d", e.EndPort, e.Port)
	}
	if e.Port != 0 && !PortProtocol(e.Protocol) {
		return fmt.Errorf("protocol %d has no ports the datapath can match", e.Protocol)
	}
	return nil
}

// PortProtocol reports whether the datapath reads ports (or, for ICMP,
// the type it matches as the port) of protocol p.
func PortProtocol(p uint8) bool {
	switch p {
	case ProtoTCP, ProtoUDP, ProtoSCTP, ProtoICMP:
		return true
	}
	return false
}

// ComparePolicyEntries orders entries by direction, identity, protocol,
// ports, allows before denies: as the policy map lists them.
func ComparePolicyEntries(x, y PolicyEntry) int {
	return cmp.Or(cmp.Compare(x.Direction, y.Direction), cmp.Compare(x.Identity, y.Identity),
		cmp.Compare(x.Protocol, y.Protocol), cmp.Compare(x.Port, y.Port), cmp.Compare(x.EndPort, y.EndPort),
		CompareBools(x.Deny, y.Deny))
}

// CompareBools orders false before true.
func CompareBools(x, y bool) int {
	switch {
	case x == y:
		return 0
	case x:
		return 1
	}
	return -1
}

// ProtoString names a protocol as policy and the debug tools print it:
// any (0), icmp, tcp, udp, sctp, else its number.
func ProtoString(p uint8) string {
	switch p {
	case 0:
		return "any"
	case ProtoICMP:
		return "icmp"
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoSCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}
