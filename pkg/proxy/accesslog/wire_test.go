package accesslog

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// roundTrip is r as the agent reads it from a Sender's frame.
func roundTrip(t testing.TB, e *encoder, r Record) Record {
	t.Helper()
	b, ok := e.appendFrame(nil, &r)
	if !ok {
		t.Fatal("over maxRecord")
	}
	msg, n := protowire.ConsumeBytes(b)
	if n != len(b) {
		t.Fatalf("a frame of %d bytes, %d of them the message", len(b), n)
	}
	got, err := decode(msg)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return got
}

// randomRecord is a record with every field drawn at random, strings
// valid UTF-8, as the proxy makes them.
func randomRecord(rnd *rand.Rand) Record {
	runes := []rune("aZ/.-: \u00e9\u4e16\U0001F600")
	str := func() string {
		b := make([]rune, rnd.IntN(12))
		for i := range b {
			b[i] = runes[rnd.IntN(len(runes))]
		}
		return string(b)
	}
	strs := func() []string {
		var ss []string
		for range rnd.IntN(4) {
			ss = append(ss, str())
		}
		return ss
	}
	addr := func() netip.Addr {
		var a [16]byte
		for i := range a {
			a[i] = byte(rnd.Uint32())
		}
		if rnd.IntN(2) == 0 {
			return netip.AddrFrom4([4]byte(a[:4]))
		}
		return netip.AddrFrom16(a)
	}
	r := Record{
		Time: time.Unix(rnd.Int64N(1<<33), rnd.Int64N(1e9)).UTC(), Type: RecordType(1 + rnd.IntN(2)),
		Verdict: Verdict(1 + rnd.IntN(3)), Direction: spec.Direction(1 + rnd.IntN(2)),
		Src: netip.AddrPortFrom(addr(), uint16(rnd.Uint32())), Dst: netip.AddrPortFrom(addr(), uint16(rnd.Uint32())),
		SrcIdentity: identity.NumericIdentity(rnd.Uint32()), DstIdentity: identity.NumericIdentity(rnd.Uint32() >> rnd.IntN(32)),
		SrcEndpoint: uint16(rnd.Uint32()), DstEndpoint: uint16(rnd.IntN(2) * rnd.IntN(1<<16)),
		Protocol: uint8(rnd.Uint32()), Latency: time.Duration(rnd.Int64N(1 << 40)),
	}
	if rnd.IntN(2) == 0 {
		r.DNS = &DNSRecord{Query: str(), QTypes: strs(), RCode: uint16(rnd.IntN(24)), TTL: rnd.Uint32() >> rnd.IntN(32),
			CNAMEs: strs(), RRTypes: strs()}
		for range rnd.IntN(5) {
			r.DNS.IPs = append(r.DNS.IPs, addr())
		}
		return r
	}
	r.HTTP = &HTTPRecord{Method: str(), URL: str(), Protocol: str(), Code: rnd.IntN(600)}
	for i := range rnd.IntN(5) {
		if r.HTTP.Headers == nil {
			r.HTTP.Headers = map[string][]string{}
		}
		r.HTTP.Headers[fmt.Sprint("H", i)] = append(strs(), str())
	}
	return r
}

// TestFramesCarryEveryField: a record the proxy makes reaches the agent
// whole, each field of it.
func TestFramesCarryEveryField(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var e encoder // its buffers kept from one record to the next
	for i := range 5000 {
		r := randomRecord(rnd)
		if got := roundTrip(t, &e, r); !reflect.DeepEqual(got, r) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got, r)
		}
	}
	for _, r := range []Record{dnsRecord(1), httpRecord()} {
		if got := roundTrip(t, &e, r); !reflect.DeepEqual(got, r) {
			t.Errorf("got %+v\nwant %+v", got, r)
		}
	}
}

// TestStringsReachTheAgentAsUTF8: a pod chooses the bytes of its
// headers, URL and DNS names; Hubble's protobufs refuse strings that are
// not UTF-8, so the agent must get them made valid, not a stream that a
// pod can break.
func TestStringsReachTheAgentAsUTF8(t *testing.T) {
	var e encoder
	h := httpRecord()
	h.HTTP.URL = "http://echo/\xff\xfe"
	h.HTTP.Headers = map[string][]string{"X-\xc3": {"ok", "a\x80b"}}
	got := roundTrip(t, &e, h).HTTP
	if got.URL != "http://echo/\uFFFD" || !reflect.DeepEqual(got.Headers, map[string][]string{"X-\uFFFD": {"ok", "a\uFFFDb"}}) {
		t.Errorf("HTTP record %+v", got)
	}
	d := dnsRecord(1)
	d.DNS.Query, d.DNS.CNAMEs = "a\xc0.example.", []string{"\xe2\x82"}
	if got := roundTrip(t, &e, d).DNS; got.Query != "a\uFFFD.example." || got.CNAMEs[0] != "\uFFFD" {
		t.Errorf("DNS record %+v", got)
	}
}

// TestFieldsOfALaterVersionAreSkipped: a proxy a version ahead may send
// fields this agent does not know.
func TestFieldsOfALaterVersionAreSkipped(t *testing.T) {
	var e encoder
	r := httpRecord()
	b, _ := e.appendFrame(nil, &r)
	msg, _ := protowire.ConsumeBytes(b)
	msg = protowire.AppendString(protowire.AppendTag(msg, 99, protowire.BytesType), "new")
	msg = protowire.AppendFixed64(protowire.AppendTag(msg, 100, protowire.Fixed64Type), 7)
	got, err := decode(msg)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("decode: %+v, %v; want %+v", got, err, r)
	}
}

func BenchmarkFrame(b *testing.B) {
	var e encoder
	r := httpRecord()
	var frame []byte
	b.ReportAllocs()
	for b.Loop() {
		frame, _ = e.appendFrame(frame[:0], &r)
		msg, _ := protowire.ConsumeBytes(frame)
		if _, err := decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}
