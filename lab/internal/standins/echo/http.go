package echo

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
)

// httpHandler answers every request with 200 and the echo app's response
// fields, one Key=value line each, in the app's order: what the server is,
// what it was asked and by whom. The app's query parameters that change the
// answer (codes, delay, headers) are not implemented: the suite sends none.
type httpHandler struct {
	port             int
	version, cluster string
	hostname         string
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	field := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, v) }
	field("ServiceVersion", h.version)
	field("ServicePort", strconv.Itoa(h.port))
	field("Host", r.Host)
	field("URL", r.RequestURI)
	field("Cluster", h.cluster)
	field("Method", r.Method)
	field("Proto", r.Proto)
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	field("IP", ip)
	alpn := ""
	if r.TLS != nil {
		alpn = r.TLS.NegotiatedProtocol
	}
	field("Alpn", alpn)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range r.Header[k] {
			field("RequestHeader", k+":"+v)
		}
	}
	if h.hostname != "" {
		field("Hostname", h.hostname)
	}
	field("StatusCode", strconv.Itoa(http.StatusOK))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b.Bytes())
	}
}
