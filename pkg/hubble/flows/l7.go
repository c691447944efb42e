package flows

import (
	"fmt"
	"strings"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
)

// L7Summary is an L7 record in Cilium's words, the summary its parser
// gives L7 flows: "HTTP/1.1 GET http://host/path" for a request, with the
// status and the latency in milliseconds before it for a response; "DNS
// Query NAME TYPES" for a query, and for an answer its addresses and
// CNAMEs, or its code if not NOERROR, and where it was seen. Empty for
// neither HTTP nor DNS.
func L7Summary(l7 *flow.Layer7) string {
	response := l7.GetType() == flow.L7FlowType_RESPONSE
	if h := l7.GetHttp(); h != nil {
		req := h.GetMethod() + " " + h.GetUrl()
		if response {
			return fmt.Sprintf("%s %d %dms (%s)", h.GetProtocol(), h.GetCode(), time.Duration(l7.GetLatencyNs())/time.Millisecond, req)
		}
		return h.GetProtocol() + " " + req
	}
	d := l7.GetDns()
	if d == nil {
		return ""
	}
	qtypes := strings.Join(d.GetQtypes(), ",")
	if !response {
		return fmt.Sprintf("DNS Query %s %s", d.GetQuery(), qtypes)
	}
	var answer string
	if d.GetRcode() != 0 {
		answer = "RCode: " + rcodeName(d.GetRcode())
	} else {
		var parts []string
		if len(d.GetIps()) > 0 {
			parts = append(parts, fmt.Sprintf("%q", strings.Join(d.GetIps(), ",")))
		}
		if len(d.GetCnames()) > 0 {
			parts = append(parts, fmt.Sprintf("CNAMEs: %q", strings.Join(d.GetCnames(), ",")))
		}
		answer = strings.Join(parts, " ")
	}
	return fmt.Sprintf("DNS Answer %s TTL: %d (Proxy %s %s)", answer, d.GetTtl(), d.GetQuery(), qtypes)
}

// rcodeNames are the DNS response codes as Cilium's summaries name them
// (gopacket's names).
var rcodeNames = map[uint32]string{
	0: "No Error", 1: "Format Error", 2: "Server Failure", 3: "Non-Existent Domain", 4: "Not Implemented",
	5: "Query Refused", 6: "Name Exists when it should not", 7: "RR Set Exists when it should not",
	8: "RR Set that should exist does not", 9: "Server Not Authoritative for zone", 10: "Name not contained in zone",
	16: "Bad OPT Version", 17: "Key not recognized", 18: "Signature out of time window", 19: "Bad TKEY Mode",
	20: "Duplicate key name", 21: "Algorithm not supported", 22: "Bad Truncation", 23: "Bad Cookie",
}

func rcodeName(rcode uint32) string {
	if name, ok := rcodeNames[rcode]; ok {
		return name
	}
	return "Unknown"
}
