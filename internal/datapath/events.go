package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// EventType says what an Event records. The numbers are Cilium's monitor
// message types.
type EventType uint8

const (
	EventDrop          = EventType(lxcEventTypeEVENT_DROP)
	EventTrace         = EventType(lxcEventTypeEVENT_TRACE)
	EventPolicyVerdict = EventType(lxcEventTypeEVENT_POLICY_VERDICT)
	// EventTraceSock: socket-level balancing saw a connect or send to a
	// frontend (Xlate says before or after it translated it).
	EventTraceSock = EventType(lxcEventTypeEVENT_TRACE_SOCK)
)

func (t EventType) String() string {
	switch t {
	case EventDrop:
		return "drop"
	case EventTrace:
		return "trace"
	case EventPolicyVerdict:
		return "policy-verdict"
	case EventTraceSock:
		return "trace-sock"
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// TracePoint is where a trace event was observed (Cilium's numbers).
type TracePoint uint8

const (
	TraceToLXC       = TracePoint(lxcTracePointTRACE_TO_LXC)
	TraceToHost      = TracePoint(lxcTracePointTRACE_TO_HOST)
	TraceToStack     = TracePoint(lxcTracePointTRACE_TO_STACK)
	TraceToOverlay   = TracePoint(lxcTracePointTRACE_TO_OVERLAY)
	TraceFromLXC     = TracePoint(lxcTracePointTRACE_FROM_LXC)
	TraceFromHost    = TracePoint(lxcTracePointTRACE_FROM_HOST)
	TraceFromOverlay = TracePoint(lxcTracePointTRACE_FROM_OVERLAY)
	TraceFromNetwork = TracePoint(lxcTracePointTRACE_FROM_NETWORK)
)

var tracePointNames = map[TracePoint]string{
	TraceToLXC:       "to-endpoint",
	TraceToHost:      "to-host",
	TraceToStack:     "to-stack",
	TraceToOverlay:   "to-overlay",
	TraceFromLXC:     "from-endpoint",
	TraceFromHost:    "from-host",
	TraceFromOverlay: "from-overlay",
	TraceFromNetwork: "from-network",
}

func (p TracePoint) String() string {
	if s, ok := tracePointNames[p]; ok {
		return s
	}
	return fmt.Sprintf("point(%d)", uint8(p))
}

// SockXlatePoint is where socket-level balancing saw a call (Cilium's
// numbers).
type SockXlatePoint uint8

const (
	// SockPreForward: the call as made, to the frontend.
	SockPreForward = SockXlatePoint(lxcSockXlatePointSOCK_XLATE_PRE_FWD)
	// SockPostForward: the call as translated, to the backend.
	SockPostForward = SockXlatePoint(lxcSockXlatePointSOCK_XLATE_POST_FWD)
)

func (x SockXlatePoint) String() string {
	switch x {
	case SockPreForward:
		return "pre-xlate-fwd"
	case SockPostForward:
		return "post-xlate-fwd"
	}
	return fmt.Sprintf("xlate(%d)", uint8(x))
}

// CTStatus is the connection tracking result for a packet.
type CTStatus uint8

const (
	CTNew         = CTStatus(lxcCtStatusCT_NEW)
	CTEstablished = CTStatus(lxcCtStatusCT_ESTABLISHED)
	CTReply       = CTStatus(lxcCtStatusCT_REPLY)
	CTRelated     = CTStatus(lxcCtStatusCT_RELATED)
	// CTInvalid: a TCP segment that is no SYN, of no tracked connection.
	CTInvalid = CTStatus(lxcCtStatusCT_INVALID)
)

func (c CTStatus) String() string {
	switch c {
	case CTNew:
		return "new"
	case CTEstablished:
		return "established"
	case CTReply:
		return "reply"
	case CTRelated:
		return "related"
	case CTInvalid:
		return "invalid"
	}
	return fmt.Sprintf("ct(%d)", uint8(c))
}

// Verdict of a policy lookup.
type Verdict uint8

const (
	VerdictAllow = Verdict(lxcPolicyVerdictVERDICT_ALLOW)
	VerdictDeny  = Verdict(lxcPolicyVerdictVERDICT_DENY)
)

func (v Verdict) String() string {
	switch v {
	case VerdictAllow:
		return "allowed"
	case VerdictDeny:
		return "denied"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Event is one decoded ring buffer record.
type Event struct {
	Type EventType
	// Reason is set on drops and on denied policy verdicts.
	Reason Reason
	// Point is set on traces.
	Point TracePoint
	// Xlate is set on socket traces.
	Xlate       SockXlatePoint
	Verdict     Verdict
	Direction   spec.Direction
	CT          CTStatus
	Src, Dst    netip.Addr
	SrcPort     uint16 // ICMP echo: the id on requests
	DstPort     uint16 // ICMP echo: the id on replies
	Protocol    uint8
	TCPFlags    uint8
	SrcIdentity identity.NumericIdentity
	DstIdentity identity.NumericIdentity
	// SrcEndpoint and DstEndpoint are local endpoint ids, 0 if none.
	SrcEndpoint uint16
	DstEndpoint uint16
	Ifindex     uint32
	Length      uint32
	// Monotonic is the kernel's CLOCK_MONOTONIC at the event.
	Monotonic time.Duration
	// PolicyCookie, on a policy verdict and the drop a deny causes, is
	// the deciding policy entry's cookie (0: no entry matched).
	PolicyCookie uint32
	// RevNAT is the reverse NAT index of the service that translated
	// the packet's connection (0: none): the frontend's.
	RevNAT uint16
	// NetNSCookie, on socket traces, is the network namespace of the
	// calling process (its cookie, SO_NETNS_COOKIE).
	NetNSCookie uint64
}

// eventSize is the size of a ring buffer record; a record grows only at
// its end, and oldestEventSize is the size before socket traces, which
// programs of the previous version still attached while a new agent
// starts write: what they lack reads as zero.
const (
	eventSize       = int(unsafe.Sizeof(rawEvent{}))
	oldestEventSize = int(unsafe.Offsetof(rawEvent{}.NetnsCookie))
)

func decodeEvent(b []byte) (Event, error) {
	if len(b) < oldestEventSize {
		return Event{}, fmt.Errorf("decode event: a record of %d bytes, want at least %d", len(b), oldestEventSize)
	}
	// The record is the C struct in the host's layout and byte order,
	// which rawEvent has: a copy is the whole decoding.
	var r rawEvent
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), eventSize), b)
	e := Event{
		Type:         EventType(r.Type),
		Verdict:      Verdict(r.Verdict),
		Direction:    spec.Direction(r.Direction),
		CT:           CTStatus(r.CtStatus),
		SrcPort:      htons(r.Sport),
		DstPort:      htons(r.Dport),
		Protocol:     r.Protocol,
		TCPFlags:     r.TcpFlags,
		SrcIdentity:  identity.NumericIdentity(r.SrcIdentity),
		DstIdentity:  identity.NumericIdentity(r.DstIdentity),
		SrcEndpoint:  r.SourceEp,
		DstEndpoint:  r.DstEp,
		Ifindex:      r.Ifindex,
		Length:       r.Len,
		Monotonic:    time.Duration(r.Ktime),
		PolicyCookie: r.PolicyCookie,
		RevNAT:       r.RevNat,
		NetNSCookie:  r.NetnsCookie,
	}
	if r.Family == afInet {
		e.Src = netip.AddrFrom4([4]byte(r.Saddr[:4]))
		e.Dst = netip.AddrFrom4([4]byte(r.Daddr[:4]))
	}
	switch e.Type {
	case EventTrace:
		e.Point = TracePoint(r.Subtype)
	case EventTraceSock:
		e.Xlate = SockXlatePoint(r.Subtype)
	default:
		e.Reason = Reason(r.Subtype)
	}
	return e, nil
}

// EventReader reads the node's event ring buffer.
type EventReader struct {
	rd       *ringbuf.Reader
	rec      ringbuf.Record
	deadline time.Time

	// closeMu keeps Close from dropping the ring while available reads
	// it: ringbuf's AvailableBytes takes no lock, and Close, which
	// another goroutine calls to end a blocked Read, sets it to nil.
	closeMu sync.RWMutex
	closed  bool
}

// NewEventReader opens a reader on the maps' ring buffer.
func (m *Maps) NewEventReader() (*EventReader, error) {
	rd, err := ringbuf.NewReader(m.Events)
	if err != nil {
		return nil, fmt.Errorf("open event reader: %w", err)
	}
	return &EventReader{rd: rd}, nil
}

// batchWait is how long a Read without a deadline lets events gather
// once it has read them all. The kernel wakes a reader only for the
// first event after it caught up, so a busy datapath costs a wakeup per
// batch rather than one per event; an event waits that much longer at
// most. Wakeups are most of what a flow costs: at 10,000 events a second
// 10ms takes half the CPU that 1ms does (bench/hubble), and the ring
// buffer (256 KiB, about 3,300 records) holds what 330,000 events a
// second bring in that time.
const batchWait = 10 * time.Millisecond

// ErrNoEvent is returned by Read when the deadline passed without an event.
var ErrNoEvent = errors.New("no event before deadline")

// Read blocks for the next event, until the deadline set with
// SetDeadline, or until Close.
func (r *EventReader) Read() (Event, error) {
	if r.deadline.IsZero() && r.available() == 0 {
		time.Sleep(batchWait)
	}
	err := r.rd.ReadInto(&r.rec)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return Event{}, ErrNoEvent
	}
	if err != nil {
		return Event{}, fmt.Errorf("read event: %w", err)
	}
	return decodeEvent(r.rec.RawSample)
}

// ReadBatch waits as Read does for an event, and returns it with the
// others already in the ring buffer, max at most, so that a reader
// hands on the events of a busy datapath by the batch.
func (r *EventReader) ReadBatch(max int) ([]Event, error) {
	ev, err := r.Read()
	if err != nil {
		return nil, err
	}
	batch := []Event{ev}
	for len(batch) < max && r.available() > 0 {
		if err := r.rd.ReadInto(&r.rec); err != nil {
			return batch, nil // the next call reports it
		}
		ev, err := decodeEvent(r.rec.RawSample)
		if err != nil {
			return batch, err
		}
		batch = append(batch, ev)
	}
	return batch, nil
}

// SetDeadline bounds the following Reads; the zero time removes the bound.
func (r *EventReader) SetDeadline(t time.Time) {
	r.deadline = t
	r.rd.SetDeadline(t)
}

// Close stops the reader; a blocked Read returns. It may be called from
// another goroutine than Read's.
func (r *EventReader) Close() error {
	r.closeMu.Lock()
	r.closed = true
	r.closeMu.Unlock()
	return r.rd.Close()
}

// available is the ring buffer's unread bytes; 0 once closed.
func (r *EventReader) available() int {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closed {
		return 0
	}
	return r.rd.AvailableBytes()
}
