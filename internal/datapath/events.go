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

// The event values live in spec, which sees no generated code and so
// writes the C enums' numbers out; each line here fails to compile (a
// constant index out of range) if a number there and the enum bpf2go
// generates from bpf/lib/common.h disagree.
var (
	_ = [1]struct{}{}[spec.EventDrop-spec.EventType(lxcEventTypeEVENT_DROP)]
	_ = [1]struct{}{}[spec.EventTrace-spec.EventType(lxcEventTypeEVENT_TRACE)]
	_ = [1]struct{}{}[spec.EventPolicyVerdict-spec.EventType(lxcEventTypeEVENT_POLICY_VERDICT)]
	_ = [1]struct{}{}[spec.EventTraceSock-spec.EventType(lxcEventTypeEVENT_TRACE_SOCK)]

	_ = [1]struct{}{}[spec.TraceToLXC-spec.TracePoint(lxcTracePointTRACE_TO_LXC)]
	_ = [1]struct{}{}[spec.TraceToProxy-spec.TracePoint(lxcTracePointTRACE_TO_PROXY)]
	_ = [1]struct{}{}[spec.TraceToHost-spec.TracePoint(lxcTracePointTRACE_TO_HOST)]
	_ = [1]struct{}{}[spec.TraceToStack-spec.TracePoint(lxcTracePointTRACE_TO_STACK)]
	_ = [1]struct{}{}[spec.TraceToOverlay-spec.TracePoint(lxcTracePointTRACE_TO_OVERLAY)]
	_ = [1]struct{}{}[spec.TraceFromLXC-spec.TracePoint(lxcTracePointTRACE_FROM_LXC)]
	_ = [1]struct{}{}[spec.TraceFromHost-spec.TracePoint(lxcTracePointTRACE_FROM_HOST)]
	_ = [1]struct{}{}[spec.TraceFromOverlay-spec.TracePoint(lxcTracePointTRACE_FROM_OVERLAY)]
	_ = [1]struct{}{}[spec.TraceFromNetwork-spec.TracePoint(lxcTracePointTRACE_FROM_NETWORK)]

	_ = [1]struct{}{}[spec.SockPreForward-spec.SockXlatePoint(lxcSockXlatePointSOCK_XLATE_PRE_FWD)]
	_ = [1]struct{}{}[spec.SockPostForward-spec.SockXlatePoint(lxcSockXlatePointSOCK_XLATE_POST_FWD)]

	_ = [1]struct{}{}[spec.CTNew-spec.CTStatus(lxcCtStatusCT_NEW)]
	_ = [1]struct{}{}[spec.CTEstablished-spec.CTStatus(lxcCtStatusCT_ESTABLISHED)]
	_ = [1]struct{}{}[spec.CTReply-spec.CTStatus(lxcCtStatusCT_REPLY)]
	_ = [1]struct{}{}[spec.CTRelated-spec.CTStatus(lxcCtStatusCT_RELATED)]
	_ = [1]struct{}{}[spec.CTInvalid-spec.CTStatus(lxcCtStatusCT_INVALID)]

	_ = [1]struct{}{}[spec.VerdictAllow-spec.Verdict(lxcPolicyVerdictVERDICT_ALLOW)]
	_ = [1]struct{}{}[spec.VerdictDeny-spec.Verdict(lxcPolicyVerdictVERDICT_DENY)]
	_ = [1]struct{}{}[spec.VerdictRedirect-spec.Verdict(lxcPolicyVerdictVERDICT_REDIRECT)]

	_ = [1]struct{}{}[spec.AggregationNone-spec.MonitorAggregation(lxcMonitorAggregationMONITOR_NONE)]
	_ = [1]struct{}{}[spec.AggregationLowest-spec.MonitorAggregation(lxcMonitorAggregationMONITOR_LOWEST)]
	_ = [1]struct{}{}[spec.AggregationLow-spec.MonitorAggregation(lxcMonitorAggregationMONITOR_LOW)]
	_ = [1]struct{}{}[spec.AggregationMedium-spec.MonitorAggregation(lxcMonitorAggregationMONITOR_MEDIUM)]
	_ = [1]struct{}{}[spec.AggregationMax-spec.MonitorAggregation(lxcMonitorAggregationMONITOR_MAX)]

	_ = [1]struct{}{}[spec.Forwarded-spec.Reason(lxcDropReasonREASON_FORWARDED)]
	_ = [1]struct{}{}[spec.DropInvalidSource-spec.Reason(lxcDropReasonDROP_INVALID_SIP)]
	_ = [1]struct{}{}[spec.DropPolicy-spec.Reason(lxcDropReasonDROP_POLICY)]
	_ = [1]struct{}{}[spec.DropInvalid-spec.Reason(lxcDropReasonDROP_INVALID)]
	_ = [1]struct{}{}[spec.DropUnsupportedL3-spec.Reason(lxcDropReasonDROP_UNSUPPORTED_L3)]
	_ = [1]struct{}{}[spec.DropNoTunnelKey-spec.Reason(lxcDropReasonDROP_NO_TUNNEL_KEY)]
	_ = [1]struct{}{}[spec.DropCTCreate-spec.Reason(lxcDropReasonDROP_CT_CREATE)]
	_ = [1]struct{}{}[spec.DropFragNoSupport-spec.Reason(lxcDropReasonDROP_FRAG_NOSUPPORT)]
	_ = [1]struct{}{}[spec.DropNoService-spec.Reason(lxcDropReasonDROP_NO_SERVICE)]
	_ = [1]struct{}{}[spec.DropUnknownCT-spec.Reason(lxcDropReasonDROP_UNKNOWN_CT)]
	_ = [1]struct{}{}[spec.DropNATNoMapping-spec.Reason(lxcDropReasonDROP_NAT_NO_MAPPING)]
	_ = [1]struct{}{}[spec.DropInvalidIdentity-spec.Reason(lxcDropReasonDROP_INVALID_IDENTITY)]
	_ = [1]struct{}{}[spec.DropUnknownSender-spec.Reason(lxcDropReasonDROP_UNKNOWN_SENDER)]
	_ = [1]struct{}{}[spec.DropFragNotFound-spec.Reason(lxcDropReasonDROP_FRAG_NOT_FOUND)]
	_ = [1]struct{}{}[spec.DropPolicyDeny-spec.Reason(lxcDropReasonDROP_POLICY_DENY)]
	_ = [1]struct{}{}[spec.DropNotInSourceRange-spec.Reason(lxcDropReasonDROP_NOT_IN_SRC_RANGE)]
	_ = [1]struct{}{}[spec.DropProxyLookupFailed-spec.Reason(lxcDropReasonDROP_PROXY_LOOKUP_FAILED)]
	_ = [1]struct{}{}[spec.DropProxySetFailed-spec.Reason(lxcDropReasonDROP_PROXY_SET_FAILED)]
	_ = [1]struct{}{}[spec.DropProxyUnknownProto-spec.Reason(lxcDropReasonDROP_PROXY_UNKNOWN_PROTO)]
)

// eventSize is the size of a ring buffer record; a record grows only at
// its end, and oldestEventSize is the size before socket traces, which
// programs of the previous version still attached while a new agent
// starts write: what they lack reads as zero.
const (
	eventSize       = int(unsafe.Sizeof(rawEvent{}))
	oldestEventSize = int(unsafe.Offsetof(rawEvent{}.NetnsCookie))
)

func decodeEvent(b []byte) (spec.Event, error) {
	if len(b) < oldestEventSize {
		return spec.Event{}, fmt.Errorf("decode event: a record of %d bytes, want at least %d", len(b), oldestEventSize)
	}
	// The record is the C struct in the host's layout and byte order,
	// which rawEvent has: a copy is the whole decoding.
	var r rawEvent
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), eventSize), b)
	e := spec.Event{
		Type:         spec.EventType(r.Type),
		Verdict:      spec.Verdict(r.Verdict),
		Direction:    spec.Direction(r.Direction),
		CT:           spec.CTStatus(r.CtStatus),
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
	case spec.EventTrace:
		e.Point = spec.TracePoint(r.Subtype)
	case spec.EventTraceSock:
		e.Xlate = spec.SockXlatePoint(r.Subtype)
	default:
		e.Reason = spec.Reason(r.Subtype)
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
func (r *EventReader) Read() (spec.Event, error) {
	if r.deadline.IsZero() && r.available() == 0 {
		time.Sleep(batchWait)
	}
	err := r.rd.ReadInto(&r.rec)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return spec.Event{}, ErrNoEvent
	}
	if err != nil {
		return spec.Event{}, fmt.Errorf("read event: %w", err)
	}
	return decodeEvent(r.rec.RawSample)
}

// ReadBatch waits as Read does for an event, and returns it with the
// others already in the ring buffer, max at most, so that a reader
// hands on the events of a busy datapath by the batch.
func (r *EventReader) ReadBatch(max int) ([]spec.Event, error) {
	ev, err := r.Read()
	if err != nil {
		return nil, err
	}
	batch := []spec.Event{ev}
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
