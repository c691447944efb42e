package parser

import (
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

func TestRedactURL(t *testing.T) {
	const withAll = "http://alice:s3cret@web:8080/search?q=token&x=1#frag"
	for _, tc := range []struct {
		name string
		r    Redaction
		in   string
		want string
	}{
		{"nothing asked", Redaction{}, withAll, withAll},
		{"default: the password", DefaultRedaction, withAll, "http://alice:HUBBLE_REDACTED@web:8080/search?q=token&x=1#frag"},
		{"query and fragment", Redaction{Query: true}, withAll, "http://alice:s3cret@web:8080/search"},
		{"both", Redaction{Userinfo: true, Query: true}, withAll, "http://alice:HUBBLE_REDACTED@web:8080/search"},
		{"a user without password stays", DefaultRedaction, "http://alice@web/", "http://alice@web/"},
		{"an empty password is one", DefaultRedaction, "http://alice:@web/", "http://alice:HUBBLE_REDACTED@web/"},
		{"nothing to redact: the text as it came", Redaction{Userinfo: true, Query: true}, "http://web/a%2Fb", "http://web/a%2Fb"},
		{"an empty query", Redaction{Query: true}, "http://web/?", "http://web/"},
		{"a path's escapes stay", Redaction{Query: true}, "http://web/a%2Fb?x=1", "http://web/a%2Fb"},
		{"a URL that does not parse: query", Redaction{Query: true}, "http://web/%zz?q=token", "http://web/%zz"},
		{"a URL that does not parse: password", DefaultRedaction, "http://alice:s3cret@web/%zz?q=1", "http://alice:HUBBLE_REDACTED@web/%zz?q=1"},
		{"a URL that does not parse: both", Redaction{Userinfo: true, Query: true}, "http://alice:s3cret@web/%zz?q=1", "http://alice:HUBBLE_REDACTED@web/%zz"},
		{"a URL that does not parse: an @ in the path is no userinfo", DefaultRedaction, "http://web/%zz/a:b@c", "http://web/%zz/a:b@c"},
	} {
		if got := tc.r.url(tc.in); got != tc.want {
			t.Errorf("%s: %q -> %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestHeaderRedaction(t *testing.T) {
	names := []string{"Authorization", "content-type", "X-Api-Key", "x-request-id"}
	for _, tc := range []struct {
		name string
		h    HeaderRedaction
		want []string // the names redacted
	}{
		{"none", HeaderRedaction{}, nil},
		{"all", AllHeaders(), names},
		{"allow: all others, in any case", HeadersExcept([]string{"content-TYPE", " X-Request-ID"}), []string{"Authorization", "X-Api-Key"}},
		{"allow nothing given: all", HeadersExcept([]string{""}), names},
		{"deny: these only, in any case", OnlyHeaders([]string{"authorization", "X-API-KEY "}), []string{"Authorization", "X-Api-Key"}},
		{"deny nothing given: none", OnlyHeaders(nil), nil},
	} {
		var got []string
		for _, n := range names {
			if tc.h.redacts(n) {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: redacts %q, want %q", tc.name, got, tc.want)
		}
	}
}

// An HTTP record's flow: headers' values and the URL redacted as asked,
// in the l7 record and in the summary alike; a header with two values
// has both redacted; DNS flows are never redacted.
func TestDecodeRecordRedacts(t *testing.T) {
	request := accesslog.Record{Type: accesslog.Request, Verdict: accesslog.Forwarded, Direction: spec.Egress,
		Src: netip.MustParseAddrPort("10.0.0.1:40000"), Dst: netip.MustParseAddrPort("10.0.1.2:80"), Protocol: spec.ProtoTCP,
		HTTP: &accesslog.HTTPRecord{Method: "GET", URL: "http://bob:pw@web/login?token=abc", Protocol: "HTTP/1.1",
			Headers: http.Header{"Authorization": {"Bearer abc"}, "Cookie": {"a=1", "b=2"}, "Accept": {"*/*"}}}}
	dns := accesslog.Record{Type: accesslog.Request, Verdict: accesslog.Forwarded, Direction: spec.Egress,
		Src: netip.MustParseAddrPort("10.0.0.1:40001"), Dst: netip.MustParseAddrPort("10.0.1.3:53"), Protocol: spec.ProtoUDP,
		DNS: &accesslog.DNSRecord{Query: "secret.example.com.", QTypes: []string{"A"}}}
	type header struct{ k, v string }
	for _, tc := range []struct {
		name    string
		r       *Redaction // nil: the parser's default
		url     string
		headers []header
	}{
		{"default", nil, "http://bob:HUBBLE_REDACTED@web/login?token=abc",
			[]header{{"Accept", "*/*"}, {"Authorization", "Bearer abc"}, {"Cookie", "a=1"}, {"Cookie", "b=2"}}},
		{"nothing", &Redaction{}, "http://bob:pw@web/login?token=abc",
			[]header{{"Accept", "*/*"}, {"Authorization", "Bearer abc"}, {"Cookie", "a=1"}, {"Cookie", "b=2"}}},
		{"query, all headers", &Redaction{Query: true, Headers: AllHeaders()}, "http://bob:pw@web/login",
			[]header{{"Accept", redacted}, {"Authorization", redacted}, {"Cookie", redacted}, {"Cookie", redacted}}},
		{"deny", &Redaction{Userinfo: true, Headers: OnlyHeaders([]string{"authorization", "cookie"})}, "http://bob:HUBBLE_REDACTED@web/login?token=abc",
			[]header{{"Accept", "*/*"}, {"Authorization", redacted}, {"Cookie", redacted}, {"Cookie", redacted}}},
		{"allow", &Redaction{Headers: HeadersExcept([]string{"ACCEPT"})}, "http://bob:pw@web/login?token=abc",
			[]header{{"Accept", "*/*"}, {"Authorization", redacted}, {"Cookie", redacted}, {"Cookie", redacted}}},
	} {
		p := New("node1", &fakeState{}, fixedClock)
		if tc.r != nil {
			p = p.WithRedaction(*tc.r)
		}
		f, err := p.DecodeRecord(request)
		if err != nil {
			t.Fatal(err)
		}
		h := f.GetL7().GetHttp()
		var headers []header
		for _, x := range h.GetHeaders() {
			headers = append(headers, header{x.GetKey(), x.GetValue()})
		}
		if h.GetUrl() != tc.url || !slices.Equal(headers, tc.headers) {
			t.Errorf("%s: url %q headers %q, want %q %q", tc.name, h.GetUrl(), headers, tc.url, tc.headers)
		}
		if want := "HTTP/1.1 GET " + tc.url; f.GetSummary() != want {
			t.Errorf("%s: summary %q, want %q", tc.name, f.GetSummary(), want)
		}
		if request.HTTP.Headers["Cookie"][0] != "a=1" {
			t.Fatalf("%s: the record's headers were changed", tc.name)
		}
		f, err = p.DecodeRecord(dns)
		if err != nil {
			t.Fatal(err)
		}
		if q := f.GetL7().GetDns().GetQuery(); q != "secret.example.com." || f.GetSummary() != "DNS Query secret.example.com. A" {
			t.Errorf("%s: DNS query %q, summary %q: want both unredacted", tc.name, q, f.GetSummary())
		}
	}
}

// FuzzRedactURL: whatever the proxy's record holds, a redacted URL that
// parses has no password but HUBBLE_REDACTED, and no query or fragment.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"http://alice:s3cret@web:8080/search?q=token#frag", "http://web/%zz?q=1", "http://a:b@c/%zz#x",
		"//u:p@h/p?q", "mailto:a@b?subject=x", "http://[::1]:80/?", "http://u:p@h@i/#%zz"} {
		f.Add(s)
	}
	r := Redaction{Userinfo: true, Query: true}
	f.Fuzz(func(t *testing.T, raw string) {
		out := r.url(raw)
		u, err := url.Parse(out)
		if err != nil {
			return
		}
		if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			t.Errorf("%q -> %q: a query or fragment left", raw, out)
		}
		if p, ok := u.User.Password(); ok && p != redacted {
			t.Errorf("%q -> %q: password %q left", raw, out, p)
		}
	})
}
