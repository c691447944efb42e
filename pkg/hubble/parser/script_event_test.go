package parser_test

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// The text form of a datapath event in the scripts:
//
//	event TYPE key=value...
//
// TYPE is drop, trace, policy-verdict or trace-sock. Keys: point
// (to-endpoint, from-network, ...: the monitor's names), reason (see
// reasons), verdict (allowed, denied), dir (ingress, egress), ct (new,
// established, reply, related, invalid), src and dst (address[:port];
// for ICMP echo the id), proto (tcp, udp, icmp, sctp), flags (syn,ack,...),
// src-id and dst-id (identities), src-ep and dst-ep (local endpoint ids),
// ifindex, len, time (since boot, 1.5s), cookie (of the deciding policy
// entry), revnat (the Service's reverse NAT index), xlate (pre-xlate-fwd,
// post-xlate-fwd) and netns (the caller's namespace cookie).

// reasons are the short names of drop reasons.
var reasons = map[string]spec.Reason{
	"forwarded": spec.Forwarded, "invalid-source": spec.DropInvalidSource, "policy": spec.DropPolicy,
	"invalid": spec.DropInvalid, "unsupported-l3": spec.DropUnsupportedL3, "no-tunnel-key": spec.DropNoTunnelKey,
	"ct-create": spec.DropCTCreate, "frag-nosupport": spec.DropFragNoSupport, "no-service": spec.DropNoService,
	"unknown-ct": spec.DropUnknownCT, "nat-no-mapping": spec.DropNATNoMapping, "invalid-identity": spec.DropInvalidIdentity,
	"unknown-sender": spec.DropUnknownSender, "frag-not-found": spec.DropFragNotFound, "policy-deny": spec.DropPolicyDeny,
}

var protocols = map[string]uint8{"tcp": spec.ProtoTCP, "udp": spec.ProtoUDP, "icmp": spec.ProtoICMP, "sctp": spec.ProtoSCTP}

var tcpFlagBits = map[string]uint8{"fin": 0x01, "syn": 0x02, "rst": 0x04, "psh": 0x08, "ack": 0x10, "urg": 0x20, "ece": 0x40, "cwr": 0x80}

// byName finds the value of a uint8 type whose String is name.
func byName[T interface {
	~uint8
	String() string
}](what, name string) (T, error) {
	for v := range 256 {
		if T(v).String() == name {
			return T(v), nil
		}
	}
	return 0, fmt.Errorf("no %s %q", what, name)
}

func parseEvent(typ string, kvs []string) (spec.Event, error) {
	var ev spec.Event
	var err error
	if ev.Type, err = byName[spec.EventType]("event type", typ); err != nil {
		return ev, err
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return ev, fmt.Errorf("%q: want key=value", kv)
		}
		if err := setField(&ev, k, v); err != nil {
			return ev, fmt.Errorf("%s: %w", k, err)
		}
	}
	return ev, nil
}

func setField(ev *spec.Event, k, v string) (err error) {
	switch k {
	case "point":
		ev.Point, err = byName[spec.TracePoint]("trace point", v)
	case "xlate":
		ev.Xlate, err = byName[spec.SockXlatePoint]("translation point", v)
	case "verdict":
		ev.Verdict, err = byName[spec.Verdict]("verdict", v)
	case "dir":
		ev.Direction, err = byName[spec.Direction]("direction", v)
	case "ct":
		ev.CT, err = byName[spec.CTStatus]("conntrack status", v)
	case "reason":
		r, ok := reasons[v]
		if !ok {
			return fmt.Errorf("no reason %q", v)
		}
		ev.Reason = r
	case "src":
		ev.Src, ev.SrcPort, err = addrPort(v)
	case "dst":
		ev.Dst, ev.DstPort, err = addrPort(v)
	case "proto":
		p, ok := protocols[v]
		if !ok {
			return fmt.Errorf("no protocol %q", v)
		}
		ev.Protocol = p
	case "flags":
		for _, name := range strings.Split(v, ",") {
			bit, ok := tcpFlagBits[name]
			if !ok {
				return fmt.Errorf("no TCP flag %q", name)
			}
			ev.TCPFlags |= bit
		}
	case "time":
		ev.Monotonic, err = time.ParseDuration(v)
	default:
		return setNumber(ev, k, v)
	}
	return err
}

// setNumber sets the fields that take a number.
func setNumber(ev *spec.Event, k, v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return err
	}
	switch k {
	case "src-id":
		ev.SrcIdentity = identity.NumericIdentity(n)
	case "dst-id":
		ev.DstIdentity = identity.NumericIdentity(n)
	case "src-ep":
		ev.SrcEndpoint = uint16(n)
	case "dst-ep":
		ev.DstEndpoint = uint16(n)
	case "ifindex":
		ev.Ifindex = uint32(n)
	case "len":
		ev.Length = uint32(n)
	case "cookie":
		ev.PolicyCookie = uint32(n)
	case "revnat":
		ev.RevNAT = uint16(n)
	case "netns":
		ev.NetNSCookie = n
	default:
		return fmt.Errorf("no such key")
	}
	return nil
}

// addrPort reads address[:port].
func addrPort(s string) (netip.Addr, uint16, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), ap.Port(), nil
	}
	a, err := netip.ParseAddr(s)
	return a, 0, err
}
