package datapath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// The record decodes field by field as the C struct lays it out: the
// copy into rawEvent agrees with a decoding that walks the fields.
func TestDecodeEventFields(t *testing.T) {
	raw := rawEvent{Ktime: 1234567, Ifindex: 7, SrcIdentity: 0x10203, DstIdentity: 2, Len: 1500,
		Sport: 0x3930, Dport: 0x5000, SourceEp: 11, DstEp: 12, Type: uint8(spec.EventTrace), Subtype: uint8(spec.TraceToLXC),
		Protocol: 6, Direction: 1, Verdict: 0, CtStatus: uint8(spec.CTReply), TcpFlags: 0x12, Family: afInet,
		PolicyCookie: 0xdeadbeef, RevNat: 42, NetnsCookie: 1 << 40}
	copy(raw.Saddr[:], []byte{10, 0, 0, 1})
	copy(raw.Daddr[:], []byte{10, 0, 1, 2})
	var b bytes.Buffer
	if err := binary.Write(&b, nativeEndian, &raw); err != nil {
		t.Fatal(err)
	}
	if b.Len() != eventSize {
		t.Fatalf("the fields take %d bytes, the struct %d: the layout has padding the decoding does not know", b.Len(), eventSize)
	}
	got, err := decodeEvent(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := spec.Event{Type: spec.EventTrace, Point: spec.TraceToLXC, Direction: 1, CT: spec.CTReply, Src: netip.MustParseAddr("10.0.0.1"),
		Dst: netip.MustParseAddr("10.0.1.2"), SrcPort: 12345, DstPort: 80, Protocol: 6, TCPFlags: 0x12, SrcIdentity: 0x10203,
		DstIdentity: 2, SrcEndpoint: 11, DstEndpoint: 12, Ifindex: 7, Length: 1500, Monotonic: 1234567 * time.Nanosecond,
		PolicyCookie: 0xdeadbeef, RevNAT: 42, NetNSCookie: 1 << 40}
	if got != want {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}

	// A record of the previous layout, from programs still attached
	// while a new agent starts: the fields it has.
	old, err := decodeEvent(b.Bytes()[:oldestEventSize])
	want.NetNSCookie = 0
	if err != nil || old != want {
		t.Errorf("a record of the previous layout: %v\n%+v\nwant\n%+v", err, old, want)
	}
	if _, err := decodeEvent(b.Bytes()[:oldestEventSize-1]); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a short record: %v, want an error naming its size", err)
	}
}
