package proxy

import (
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
	// Src is the endpoint's side for egress, Dst the server's.
	Src, Dst                 netip.AddrPort
	SrcIdentity, DstIdentity identity.NumericIdentity
	SrcEndpoint              uint16
	Protocol                 uint8 // the transport: TCP or UDP
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
	Method, URL, Protocol string
	Code                  int // a response's status
	Headers               map[string][]string
}
