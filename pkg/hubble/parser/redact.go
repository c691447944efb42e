package parser

import (
	"net/url"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
)

// redacted stands for a secret left out of a flow, as Cilium's Hubble
// writes it.
const redacted = "HUBBLE_REDACTED"

// Redaction is what HTTP flows leave out, redacted in its place: what
// Cilium's --hubble-redact-* flags ask for. It applies to the URL of the
// l7 record and so of the summary made of it; DNS flows have nothing
// redacted, as in Cilium. The zero value leaves everything in;
// DefaultRedaction is what Cilium does without --hubble-redact-enabled.
type Redaction struct {
	// Userinfo replaces the URL's password (the user name stays).
	Userinfo bool
	// Query drops the URL's query and fragment.
	Query bool
	// Headers says which headers' values are replaced.
	Headers HeaderRedaction
}

// DefaultRedaction is Cilium's Hubble without --hubble-redact-enabled:
// a password in a URL is redacted, nothing else.
var DefaultRedaction = Redaction{Userinfo: true}

// HeaderRedaction says which HTTP headers' values are replaced, by the
// header's name in any case. The zero value replaces none.
type HeaderRedaction struct {
	// except: names lists the headers kept, all others are redacted;
	// otherwise names lists the headers redacted.
	except bool
	names  map[string]bool // lower case
}

// AllHeaders redacts every header's value: Cilium's choice when
// redaction is on and neither header list is given.
func AllHeaders() HeaderRedaction { return HeaderRedaction{except: true} }

// HeadersExcept redacts the values of all headers but those named
// (--hubble-redact-http-headers-allow).
func HeadersExcept(names []string) HeaderRedaction {
	return HeaderRedaction{except: true, names: lowerSet(names)}
}

// OnlyHeaders redacts the values of the headers named and no other
// (--hubble-redact-http-headers-deny).
func OnlyHeaders(names []string) HeaderRedaction {
	return HeaderRedaction{names: lowerSet(names)}
}

// redacts says whether the value of the header name is redacted.
func (h HeaderRedaction) redacts(name string) bool {
	if !h.except && len(h.names) == 0 {
		return false
	}
	return h.names[strings.ToLower(name)] != h.except
}

// lowerSet is names in lower case, blanks around them trimmed (a list
// written "a, b"), empty ones left out.
func lowerSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			set[strings.ToLower(n)] = true
		}
	}
	return set
}

// header is a header as a flow shows it.
func (r Redaction) header(name, value string) *flow.HTTPHeader {
	if r.Headers.redacts(name) {
		value = redacted
	}
	return &flow.HTTPHeader{Key: name, Value: value}
}

// url is raw as a flow shows it.
func (r Redaction) url(raw string) string {
	if !r.Userinfo && !r.Query {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return r.unparsedURL(raw)
	}
	changed := false
	if r.Userinfo && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
			changed = true
		}
	}
	if r.Query && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "") {
		u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
		changed = true
	}
	if !changed {
		return raw
	}
	return u.String()
}

// unparsedURL redacts a URL that does not parse (a bad escape, say) by
// its text: the query from the first "?" or "#", the password between
// the scheme's "://" and the "@" that ends the userinfo.
func (r Redaction) unparsedURL(raw string) string {
	if i := strings.IndexAny(raw, "?#"); r.Query && i >= 0 {
		raw = raw[:i]
	}
	if !r.Userinfo {
		return raw
	}
	start := strings.Index(raw, "://")
	if start < 0 {
		return raw
	}
	start += len("://")
	authority := raw[start:]
	if end := strings.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	at := strings.LastIndex(authority, "@")
	colon := strings.Index(authority[:max(at, 0)], ":")
	if at < 0 || colon < 0 {
		return raw
	}
	return raw[:start+colon+1] + redacted + raw[start+at:]
}
