package accesslog

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// agent is a Listener serving into a channel, as the agent's Hubble
// would take records.
type agent struct {
	records chan Record
	stop    func()
}

func startAgent(t *testing.T, path string) *agent {
	t.Helper()
	l, err := Listen(path, hivetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{records: make(chan Record, 1<<16)}
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, func(r Record) { a.records <- r }) }()
	a.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		a.stop = func() {}
	}
	t.Cleanup(func() { a.stop() })
	return a
}

// next is the agent's next record, or a failure after a while.
func (a *agent) next(t *testing.T) Record {
	t.Helper()
	select {
	case r := <-a.records:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no record came")
		return Record{}
	}
}

func dnsRecord(i int) Record {
	return Record{Time: time.Unix(1700000000, int64(i)).UTC(), Type: Response, Verdict: Forwarded, Direction: spec.Egress,
		Src: netip.MustParseAddrPort("10.96.0.10:53"), Dst: netip.MustParseAddrPort("10.0.1.5:40000"),
		SrcIdentity: 2, DstIdentity: 1234, Protocol: spec.ProtoUDP, Latency: time.Duration(i) * time.Microsecond,
		DNS: &DNSRecord{Query: fmt.Sprintf("host-%d.example.com.", i), QTypes: []string{"A"}, IPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")},
			TTL: 30, CNAMEs: []string{"edge.example.net."}, RRTypes: []string{"CNAME", "A"}}}
}

func httpRecord() Record {
	return Record{Time: time.Unix(1700000001, 0).UTC(), Type: Request, Verdict: Denied, Direction: spec.Egress,
		Src: netip.MustParseAddrPort("10.0.1.5:40001"), Dst: netip.MustParseAddrPort("10.0.2.7:80"),
		SrcIdentity: 1234, DstIdentity: 5678, SrcEndpoint: 42, Protocol: spec.ProtoTCP,
		HTTP: &HTTPRecord{Method: "PUT", URL: "http://echo/private", Protocol: "HTTP/1.1",
			Headers: map[string][]string{"User-Agent": {"curl"}, "Accept": {"a", "b"}}}}
}

// send writes r to c as a Sender frames it.
func send(t *testing.T, c io.Writer, r Record) {
	t.Helper()
	var e encoder
	b, ok := e.appendFrame(nil, &r)
	if !ok {
		t.Fatal("a record over maxRecord")
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestListenReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "accesslog.sock")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	// An agent that died left its socket file behind.
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()

	a := startAgent(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want a socket of 0660", fi.Mode())
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := httpRecord()
	send(t, c, want)
	if got := a.next(t); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestMalformedFramesAreSkipped: a frame that holds no record is skipped
// and the connection goes on; one that breaks the stream ends it.
func TestMalformedFramesAreSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accesslog.sock")
	a := startAgent(t, path)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw := func(msg []byte) {
		if _, err := c.Write(protowire.AppendBytes(nil, msg)); err != nil {
			t.Fatal(err)
		}
	}
	noType, both, noAddr := dnsRecord(2), dnsRecord(3), dnsRecord(4)
	noType.Type = 0
	both.HTTP = httpRecord().HTTP
	noAddr.Src = netip.AddrPort{}
	send(t, c, dnsRecord(1))
	raw([]byte("not a record"))
	raw(nil)
	raw(protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), []byte{1, 2, 3})) // no address
	raw(protowire.AppendVarint(protowire.AppendTag(nil, 13, protowire.VarintType), 1))            // dns, a varint
	raw(protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 256))           // type over a byte
	send(t, c, noType)
	send(t, c, both)
	send(t, c, noAddr)
	send(t, c, dnsRecord(5))
	for _, want := range []int{1, 5} {
		if got := a.next(t); got.DNS.Query != dnsRecord(want).DNS.Query {
			t.Errorf("record %q, want %q", got.DNS.Query, dnsRecord(want).DNS.Query)
		}
	}
	select {
	case r := <-a.records:
		t.Errorf("a record of a bad frame: %+v", r)
	default:
	}

	// A frame over maxRecord is none of a Sender's: the agent hangs up.
	if _, err := c.Write(binary.AppendUvarint(nil, maxRecord+1)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Errorf("after a frame over maxRecord: read %d, %v; want the connection closed", n, err)
	}
}

// TestConnectionsAreBounded: past the limit a connection is refused, and
// the ones open keep working.
func TestConnectionsAreBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accesslog.sock")
	a := startAgent(t, path)
	var conns []net.Conn
	for range maxConnections {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// A connection holds its slot once a record of it came through.
	for i, c := range conns {
		send(t, c, dnsRecord(i))
		a.next(t)
	}
	extra, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Errorf("the connection past the limit: read %d, %v; want it closed", n, err)
	}
	send(t, conns[0], dnsRecord(9))
	if got := a.next(t); got.DNS.Query != dnsRecord(9).DNS.Query {
		t.Errorf("record %q after the refusal", got.DNS.Query)
	}
}

// FuzzDecode: whatever a frame holds, decoding it does not panic, and a
// record it accepts goes over the wire again unchanged.
func FuzzDecode(f *testing.F) {
	var e encoder
	for _, r := range []Record{dnsRecord(1), httpRecord()} {
		b, _ := e.appendFrame(nil, &r)
		msg, _ := protowire.ConsumeBytes(b)
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := decode(msg)
		if err != nil {
			return
		}
		if again := roundTrip(t, &e, r); !reflect.DeepEqual(r, again) {
			t.Fatalf("decoded %+v, then %+v", r, again)
		}
	})
}
