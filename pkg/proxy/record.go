package proxy

import "github.com/cilium-go/cilium/pkg/proxy/accesslog"

// The proxy's records are the access log's: values the agent's Hubble
// reads without linking the proxy, which pkg/proxy/accesslog carries
// from the proxy's process to the agent.
type (
	// RecordType says whether a record is of a request or of its response.
	RecordType = accesslog.RecordType
	// Verdict is what the proxy did with a request.
	Verdict = accesslog.Verdict
	// Record is one layer-7 event, what Hubble shows as an L7 flow.
	Record = accesslog.Record
	// DNSRecord is a DNS query or answer.
	DNSRecord = accesslog.DNSRecord
	// HTTPRecord is an HTTP request or response.
	HTTPRecord = accesslog.HTTPRecord
)

// Record types and verdicts.
const (
	Request   = accesslog.Request
	Response  = accesslog.Response
	Forwarded = accesslog.Forwarded
	Denied    = accesslog.Denied
	Errored   = accesslog.Errored
)
