// Package accesslog carries the layer-7 proxy's records (one per DNS or
// HTTP request and response) from the proxy's process to the agent, whose
// Hubble shows them as L7 flows: a Sender on the proxy's side that never
// holds the proxy up, a Listener on the agent's. The proxy runs apart
// from the agent and outlives its restarts, so the stream is a unix
// socket of length-prefixed protobuf records (wire.go) that either side
// may drop and open again.
//
// The records are values with no proxy behind them: Hubble's parser reads
// them without linking the proxy (pkg/proxy names them as its own).
package accesslog

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// RecordType says whether a record is of a request or of its response.
type RecordType uint8

const (
	Request RecordType = iota + 1
	Response
)

// Verdict is what the proxy did with a request: forwarded it, denied
// it (an answer in the server's name: DNS REFUSED, HTTP 403), or met an
// error (the upstream did not answer).
type Verdict uint8

const (
	Forwarded Verdict = iota + 1
	Denied
	Errored
)

// Record is one layer-7 event, what Hubble shows as an L7 flow.
type Record struct {
	Time      time.Time
	Type      RecordType
	Verdict   Verdict
	Direction spec.Direction
	// Src is the sender's side, Dst the receiver's; the local endpoint
	// whose rules judged the request is SrcEndpoint (egress) or
	// DstEndpoint (ingress) of the request.
	Src         netip.AddrPort
	Dst         netip.AddrPort
	SrcIdentity identity.NumericIdentity
	DstIdentity identity.NumericIdentity
	SrcEndpoint uint16
	DstEndpoint uint16
	Protocol    uint8 // the transport: TCP or UDP
	// Latency is a response's time since its request.
	Latency time.Duration
	DNS     *DNSRecord
	HTTP    *HTTPRecord
}

// DNSRecord is a DNS query or answer.
type DNSRecord struct {
	Query  string // the name asked, fully qualified
	QTypes []string
	// An answer's: its code, the addresses of the name (following
	// CNAMEs), the smallest TTL of those, the CNAME targets and the
	// record types it holds.
	RCode   uint16
	IPs     []netip.Addr
	TTL     uint32
	CNAMEs  []string
	RRTypes []string
}

// HTTPRecord is an HTTP request or response.
type HTTPRecord struct {
	Method   string
	URL      string
	Protocol string
	Code     int // a response's status
	Headers  map[string][]string
}

// Reply is the response record of request r, sides swapped, with r's
// other fields; the caller fills in the response's.
func (r Record) Reply() Record {
	resp := r
	resp.Type = Response
	resp.Src, resp.Dst = r.Dst, r.Src
	resp.SrcIdentity, resp.DstIdentity = r.DstIdentity, r.SrcIdentity
	resp.SrcEndpoint, resp.DstEndpoint = r.DstEndpoint, r.SrcEndpoint
	return resp
}

// check says what makes a decoded record one Hubble cannot show: the
// other side of the socket may be of another version, or no proxy.
func (r *Record) check() error {
	switch {
	case r.Type != Request && r.Type != Response:
		return fmt.Errorf("type %d", r.Type)
	case r.Verdict < Forwarded || r.Verdict > Errored:
		return fmt.Errorf("verdict %d", r.Verdict)
	case !r.Src.IsValid() || !r.Dst.IsValid():
		return errors.New("no source or destination address")
	case (r.DNS == nil) == (r.HTTP == nil):
		return errors.New("want a DNS or an HTTP record")
	}
	return nil
}
