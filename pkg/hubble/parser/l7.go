package parser

//lint:file-ignore SA1019 Hubble clients still read Summary, deprecated in flow.proto; Cilium fills it for L7 flows too.

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cilium/cilium/api/v1/flow"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/hubble/flows"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// dnsSourceProxy is the observation source of DNS records that a proxy
// made, as Cilium names it.
const dnsSourceProxy = "proxy"

// DecodeRecord makes an L7 flow of a layer-7 proxy's record, as Cilium's
// Hubble shows its proxies' access log: the sides named as the
// datapath's flows name them, the request or response in the l7 field.
// A denied request is DROPPED, with no drop reason; one that met an
// error is ERROR.
func (p *Parser) DecodeRecord(r accesslog.Record) (*flow.Flow, error) {
	if !r.Src.IsValid() || !r.Dst.IsValid() {
		return nil, errors.New("an L7 record without addresses")
	}
	var verdict flow.Verdict
	switch r.Verdict {
	case accesslog.Forwarded:
		verdict = flow.Verdict_FORWARDED
	case accesslog.Denied:
		verdict = flow.Verdict_DROPPED
	case accesslog.Errored:
		verdict = flow.Verdict_ERROR
	default:
		return nil, fmt.Errorf("an L7 record of verdict %d", r.Verdict)
	}
	l7 := &flow.Layer7{Type: flow.L7FlowType_REQUEST}
	if r.Type == accesslog.Response {
		l7.Type = flow.L7FlowType_RESPONSE
		if r.Latency > 0 {
			l7.LatencyNs = uint64(r.Latency)
		}
	}
	switch {
	case r.DNS != nil:
		l7.Record = &flow.Layer7_Dns{Dns: dnsOf(r)}
	case r.HTTP != nil:
		l7.Record = &flow.Layer7_Http{Http: p.redaction.http(r)}
	default:
		return nil, errors.New("an L7 record of neither DNS nor HTTP")
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.refresh()
	parts := new(flowParts)
	f := &parts.f
	parts.time.Seconds, parts.time.Nanos = r.Time.Unix(), int32(r.Time.Nanosecond())
	f.Time = &parts.time
	f.Uuid = p.newUUID()
	f.Emitter = emitter
	f.Type = flow.FlowType_L7
	f.NodeName = p.node
	f.EventType = eventType(flows.EventTypeL7, 0)
	f.Verdict = verdict
	f.TrafficDirection = direction(r.Direction)
	src, dst := r.Src.Addr().Unmap(), r.Dst.Addr().Unmap()
	parts.ip.Source, parts.ip.Destination = p.addrString(src), p.addrString(dst)
	parts.ip.IpVersion = flow.IPVersion_IPv4
	if src.Is6() {
		parts.ip.IpVersion = flow.IPVersion_IPv6
	}
	f.IP = &parts.ip
	// The proxy sees the connection, not its packets: no TCP flags.
	f.L4 = parts.layer4(spec.Event{Protocol: r.Protocol, SrcPort: r.Src.Port(), DstPort: r.Dst.Port()})
	parts.tcpL4.Flags = nil
	f.IsReply = replyFalse
	if r.Type == accesslog.Response {
		f.IsReply = replyTrue
	}
	f.Source = p.endpoint(r.SrcEndpoint, src, r.SrcIdentity)
	f.Destination = p.endpoint(r.DstEndpoint, dst, r.DstIdentity)
	p.sideNames(f, src, dst)
	f.L7 = l7
	f.Summary = flows.L7Summary(l7)
	return f, nil
}

// dnsOf is a DNS record as a flow's: a request has its question only.
func dnsOf(r accesslog.Record) *flow.DNS {
	d := r.DNS
	out := &flow.DNS{Query: d.Query, ObservationSource: dnsSourceProxy, Qtypes: d.QTypes}
	if r.Type != accesslog.Response {
		return out
	}
	for _, ip := range d.IPs {
		out.Ips = append(out.Ips, ip.String())
	}
	out.Ttl, out.Cnames, out.Rcode, out.Rrtypes = d.TTL, d.CNAMEs, uint32(d.RCode), d.RRTypes
	return out
}

// http is an HTTP record as a flow's: a request has no status, the
// headers come sorted by name, and what r says is redacted.
func (r Redaction) http(rec accesslog.Record) *flow.HTTP {
	h := rec.HTTP
	out := &flow.HTTP{Method: h.Method, Url: r.url(h.URL), Protocol: h.Protocol}
	if rec.Type == accesslog.Response {
		out.Code = uint32(h.Code)
	}
	for _, k := range slices.Sorted(maps.Keys(h.Headers)) {
		for _, v := range h.Headers[k] {
			out.Headers = append(out.Headers, r.header(k, v))
		}
	}
	return out
}
