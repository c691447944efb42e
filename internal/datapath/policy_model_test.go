package datapath

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gopacket/gopacket/layers"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// This file holds what FuzzPrivilegedPolicy checks the programs against: how fuzz
// bytes become a scenario (a policy for endpoint A, a few flows, and
// packets interleaved with policy changes), and a Go model of what the
// datapath must do with each packet. The model is written from the policy
// semantics, not from the datapath's code: it shares nothing with
// PolicyMapState, PolicyAllows or the C.

// Rules and flows draw ports from short lists, so that random bytes give
// rules that overlap, nest and touch, and packets that hit their edges:
// neighbours (79, 80, 81), the edges of aligned blocks (95, 96, 1023,
// 1024) and the ends of the port space.
var (
	fuzzPorts          = [16]uint16{1, 53, 79, 80, 81, 88, 95, 96, 443, 1023, 1024, 5000, 8080, 40000, 40001, 65535}
	fuzzICMPTypes      = [8]uint16{1, 3, 7, 8, 9, 11, 13, 255}
	fuzzRuleIdentities = [4]identity.NumericIdentity{idC, idD, identity.Unknown, identity.World}
	fuzzRuleProtocols  = [5]uint8{0, spec.ProtoTCP, spec.ProtoUDP, spec.ProtoSCTP, spec.ProtoICMP}
	fuzzFlowProtocols  = [4]uint8{spec.ProtoTCP, spec.ProtoUDP, spec.ProtoSCTP, spec.ProtoICMP}
	fuzzPeers          = [3]netip.Addr{ipC, ipD, ipWorld}
)

const (
	// maxPolicySteps keeps one input cheap.
	maxPolicySteps = 64
	// policyChangeOp and above: the step is a new policy, which follows.
	policyChangeOp = 0xf0
)

// TCP flags a step sends: natural is SYN, SYN-ACK, then ACK.
const (
	flagsNatural byte = 0
	flagsSYN     byte = 4
	flagsFINACK  byte = 5
	flagsRST     byte = 6
	flagsSYNACK  byte = 7
)

// policyFlow is a connection that endpoint A opens to a peer (egress) or
// the peer opens to A (ingress). ICMP flows are echoes with the client
// port as id.
type policyFlow struct {
	ingress                bool
	peer                   netip.Addr
	proto                  uint8
	clientPort, serverPort uint16
}

// policyStep is a packet of a flow, or a policy change when policy is set.
type policyStep struct {
	policy     []spec.PolicyEntry
	flow       int
	fromServer bool
	flags      byte
}

type policyScenario struct {
	mode   spec.RoutingMode
	flows  []policyFlow
	policy []spec.PolicyEntry
	steps  []policyStep
}

// fuzzBytes reads fuzz input; past its end it reads zeros, so every input
// decodes to a scenario.
type fuzzBytes []byte

func (r *fuzzBytes) next() byte {
	if len(*r) == 0 {
		return 0
	}
	c := (*r)[0]
	*r = (*r)[1:]
	return c
}

// decodePolicyScenario reads: a mode byte; a flow count byte and two bytes
// per flow; a policy; then steps, one byte each, a policy change being
// policyChangeOp followed by the new policy.
func decodePolicyScenario(data []byte) policyScenario {
	r := fuzzBytes(data)
	s := policyScenario{mode: spec.Tunnel}
	if r.next()&1 != 0 {
		s.mode = spec.Native
	}
	for range 1 + int(r.next()%6) {
		s.flows = append(s.flows, decodeFlow(&r))
	}
	s.policy = decodePolicy(&r)
	for len(r) > 0 && len(s.steps) < maxPolicySteps {
		op := r.next()
		if op >= policyChangeOp {
			s.steps = append(s.steps, policyStep{policy: decodePolicy(&r)})
			continue
		}
		s.steps = append(s.steps, policyStep{
			flow: int(op&7) % len(s.flows), fromServer: op&8 != 0, flags: op >> 4 & 7,
		})
	}
	return s
}

// decodeFlow: a = ingress (bit 0), peer (bits 1-2), protocol (bits 3-4);
// b = client port index (high nibble), server port index (low nibble).
func decodeFlow(r *fuzzBytes) policyFlow {
	a, b := r.next(), r.next()
	return policyFlow{
		ingress:    a&1 != 0,
		peer:       fuzzPeers[int(a>>1&3)%len(fuzzPeers)],
		proto:      fuzzFlowProtocols[a>>3&3],
		clientPort: fuzzPorts[b>>4],
		serverPort: fuzzPorts[b&15],
	}
}

// decodePolicy reads a rule count (1 to 8) and three bytes per rule.
func decodePolicy(r *fuzzBytes) []spec.PolicyEntry {
	out := make([]spec.PolicyEntry, 1+int(r.next()%8))
	for i := range out {
		out[i] = decodeRule(r)
	}
	return out
}

// decodeRule: a = ingress (bit 0), deny (bit 1), identity (bits 2-3),
// protocol (high nibble); b = port form (bits 0-1: all, single, range,
// all), first port index (high nibble); c = last port index (low nibble).
// Only rules that the policy writer must accept come out.
func decodeRule(r *fuzzBytes) spec.PolicyEntry {
	a, b, c := r.next(), r.next(), r.next()
	e := spec.PolicyEntry{
		Direction: spec.Egress,
		Identity:  fuzzRuleIdentities[a>>2&3],
		Protocol:  fuzzRuleProtocols[int(a>>4)%len(fuzzRuleProtocols)],
		Deny:      a&2 != 0,
	}
	if a&1 != 0 {
		e.Direction = spec.Ingress
	}
	if e.Protocol == 0 {
		return e
	}
	ports := fuzzPorts[:]
	if e.Protocol == spec.ProtoICMP {
		ports = fuzzICMPTypes[:]
	}
	lo, hi := ports[int(b>>4)%len(ports)], ports[int(c&15)%len(ports)]
	switch b & 3 {
	case 1:
		e.Port = lo
	case 2:
		e.Port, e.EndPort = min(lo, hi), max(lo, hi)
	}
	return e
}

// packet builds the step's packet. sent records which ends of which flows
// have sent, for the natural TCP flags.
func (s policyScenario) packet(st policyStep, sent map[[2]int]bool) pkt {
	fl := s.flows[st.flow]
	client, server := ipA, fl.peer
	if fl.ingress {
		client, server = fl.peer, ipA
	}
	side := [2]int{st.flow, 0}
	if st.fromServer {
		side[1] = 1
	}
	first := !sent[side]
	sent[side] = true
	if fl.proto == spec.ProtoICMP {
		if st.fromServer {
			return echo(server, client, fl.clientPort, true)
		}
		return echo(client, server, fl.clientPort, false)
	}
	p := pkt{src: client, dst: server, proto: layers.IPProtocol(fl.proto), sport: fl.clientPort, dport: fl.serverPort}
	if st.fromServer {
		p.src, p.dst, p.sport, p.dport = server, client, fl.serverPort, fl.clientPort
	}
	if fl.proto == spec.ProtoTCP {
		p.flags = tcpFlagsOf(st.flags, st.fromServer, first)
	}
	return p
}

func tcpFlagsOf(v byte, fromServer, first bool) string {
	switch v {
	case flagsSYN:
		return "S"
	case flagsFINACK:
		return "FA"
	case flagsRST:
		return "R"
	case flagsSYNACK:
		return "SA"
	}
	switch {
	case !first:
		return "A"
	case fromServer:
		return "SA"
	}
	return "S"
}

// ctTuple is a connection as its first packet named it; ICMP echoes put
// the id in the port of the side that asked.
type ctTuple struct {
	src, dst     netip.Addr
	sport, dport uint16
	proto        uint8
}

func (k ctTuple) reverse() ctTuple {
	return ctTuple{src: k.dst, dst: k.src, sport: k.dport, dport: k.sport, proto: k.proto}
}

func tupleOf(p pkt) ctTuple {
	k := ctTuple{src: p.src, dst: p.dst, sport: p.sport, dport: p.dport, proto: uint8(p.proto)}
	if p.proto == layers.IPProtocolICMPv4 {
		k.sport, k.dport = p.icmpID, 0
		if p.icmpType == layers.ICMPv4TypeEchoReply {
			k.sport, k.dport = 0, p.icmpID
		}
	}
	return k
}

// policyPort is what a rule's ports are compared with: the destination
// port, or the ICMP type.
func policyPort(p pkt) uint16 {
	if p.proto == layers.IPProtocolICMPv4 {
		return uint16(p.icmpType)
	}
	return p.dport
}

// peerIdentity is the identity endpoint A's ipcache gives a peer.
func peerIdentity(a netip.Addr) uint32 {
	switch a {
	case ipC:
		return idC
	case ipD:
		return idD
	}
	return uint32(identity.World)
}

// modelVerdict is what the model expects: a pass, or a drop for reason.
type modelVerdict struct {
	pass   bool
	reason spec.Reason
}

func (v modelVerdict) String() string {
	if v.pass {
		return "pass"
	}
	return fmt.Sprintf("drop (%v)", v.reason)
}

// ruleMatches says whether rule r speaks about a packet of protocol proto
// to port, from or to remote, in direction dir. A rule without protocol
// covers every protocol, a rule without port every port; otherwise the
// port lies in Port..EndPort (just Port when EndPort is not above it).
func ruleMatches(r spec.PolicyEntry, dir spec.Direction, remote identity.NumericIdentity, proto uint8, port uint16) bool {
	last := max(r.Port, r.EndPort)
	return r.Direction == dir &&
		(r.Identity == identity.Unknown || r.Identity == remote) &&
		(r.Protocol == 0 || r.Protocol == proto) &&
		(r.Port == 0 || (r.Port <= port && port <= last))
}

// judge is the policy semantics for a new connection: a deny that matches
// drops it whatever allows match too, an allow that matches passes it,
// and with neither it is dropped.
func judge(rules []spec.PolicyEntry, dir spec.Direction, remote identity.NumericIdentity, proto uint8, port uint16) modelVerdict {
	var denied, allowed bool
	for _, r := range rules {
		if ruleMatches(r, dir, remote, proto, port) {
			denied = denied || r.Deny
			allowed = allowed || !r.Deny
		}
	}
	switch {
	case denied:
		return modelVerdict{reason: spec.DropPolicyDeny}
	case allowed:
		return modelVerdict{pass: true}
	}
	return modelVerdict{reason: spec.DropPolicy}
}

// modelConn is what the model remembers of a connection: how endpoint A
// judged its first packet.
type modelConn struct {
	dir    spec.Direction
	remote identity.NumericIdentity
	port   uint16
}

// policyModel is endpoint A, enforcing both directions, with its
// conntrack.
type policyModel struct {
	rules []spec.PolicyEntry
	conns map[ctTuple]modelConn
}

func newPolicyModel(rules []spec.PolicyEntry) *policyModel {
	return &policyModel{rules: rules, conns: map[ctTuple]modelConn{}}
}

// packet is what becomes of p, which A sends or receives. A packet of a
// tracked connection, either way, passes; a TCP segment that is not a
// pure SYN starts nothing; anything else starts a connection if policy
// allows it.
func (m *policyModel) packet(p pkt) modelVerdict {
	k := tupleOf(p)
	if _, ok := m.conns[k]; ok {
		return modelVerdict{pass: true}
	}
	if _, ok := m.conns[k.reverse()]; ok {
		return modelVerdict{pass: true}
	}
	if p.proto == layers.IPProtocolTCP && (!strings.Contains(p.flags, "S") || strings.Contains(p.flags, "A")) {
		return modelVerdict{reason: spec.DropUnknownCT}
	}
	c := modelConn{dir: spec.Egress, remote: identity.NumericIdentity(peerIdentity(p.dst)), port: policyPort(p)}
	if p.dst == ipA {
		c.dir, c.remote = spec.Ingress, identity.NumericIdentity(peerIdentity(p.src))
	}
	v := judge(m.rules, c.dir, c.remote, k.proto, c.port)
	if v.pass {
		m.conns[k] = c
	}
	return v
}

// setPolicy replaces the rules and forgets the connections whose first
// packet the new rules would not let through.
func (m *policyModel) setPolicy(rules []spec.PolicyEntry) {
	m.rules = rules
	for k, c := range m.conns {
		if !judge(rules, c.dir, c.remote, k.proto, c.port).pass {
			delete(m.conns, k)
		}
	}
}

func (m *policyModel) String() string {
	var b strings.Builder
	b.WriteString("policy:")
	for _, r := range m.rules {
		fmt.Fprintf(&b, "\n\t%s", r)
	}
	b.WriteString("\nconnections:")
	for k, c := range m.conns {
		fmt.Fprintf(&b, "\n\t%d %v:%d -> %v:%d (%s, identity %d, port %d)", k.proto, k.src, k.sport, k.dst, k.dport, c.dir, c.remote, c.port)
	}
	return b.String()
}

func describePacket(p pkt) string {
	if p.proto == layers.IPProtocolICMPv4 {
		return fmt.Sprintf("ICMP type %d id %d %v -> %v", p.icmpType, p.icmpID, p.src, p.dst)
	}
	s := fmt.Sprintf("%v %v:%d -> %v:%d", p.proto, p.src, p.sport, p.dst, p.dport)
	if p.flags != "" {
		s += " [" + p.flags + "]"
	}
	return s
}
