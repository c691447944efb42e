package l7

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func request(method, target string, headers ...string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	return r
}

// Cilium's documented examples: the "star wars" demo's L7 rule, the
// getting-started GET /public rule, header presence and value, and the
// anchoring of the regular expressions (whole method, path with its
// query, and host).
func TestHTTPRulesExamples(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []HTTPRule
		allow []*http.Request
		deny  []*http.Request
	}{
		{"star wars: POST /v1/request-landing", []HTTPRule{{Method: "POST", Path: "/v1/request-landing"}},
			[]*http.Request{request("POST", "http://deathstar/v1/request-landing")},
			[]*http.Request{request("PUT", "http://deathstar/v1/exhaust-port"), request("GET", "http://deathstar/v1/request-landing"),
				request("POST", "http://deathstar/v1/request-landing/x"), request("POST", "http://deathstar/v1/request-landing?x=1"),
				request("POSTX", "http://deathstar/v1/request-landing")}},
		{"GET /public and below", []HTTPRule{{Method: "GET", Path: "/public.*"}},
			[]*http.Request{request("GET", "http://a/public"), request("GET", "http://a/public/x?y=1")},
			[]*http.Request{request("GET", "http://a/private"), request("GET", "http://a/x/public")}},
		{"two rules: either", []HTTPRule{{Method: "GET", Path: "/a"}, {Method: "PUT|POST", Path: "/b"}},
			[]*http.Request{request("GET", "http://a/a"), request("PUT", "http://a/b"), request("POST", "http://a/b")},
			[]*http.Request{request("GET", "http://a/b"), request("PUT", "http://a/a")}},
		{"host", []HTTPRule{{Host: `api\.example\.com(:80)?`}},
			[]*http.Request{request("GET", "http://api.example.com/"), request("GET", "http://api.example.com:80/")},
			[]*http.Request{request("GET", "http://api.example.com.evil/"), request("GET", "http://xapi.example.com/")}},
		{"headers: presence and value", []HTTPRule{{Headers: []string{"X-Has-Token", "X-My-Header: true"}}},
			[]*http.Request{request("GET", "http://a/", "X-Has-Token", "", "x-my-header", "true")},
			[]*http.Request{request("GET", "http://a/", "X-My-Header", "true"), request("GET", "http://a/", "X-Has-Token", "1", "X-My-Header", "false")}},
		{"an empty rule allows every request (visibility)", []HTTPRule{{}},
			[]*http.Request{request("DELETE", "http://a/anything?x")}, nil},
		{"no rules allow nothing", nil, nil, []*http.Request{request("GET", "http://a/")}},
	} {
		rs, err := CompileHTTPRules(tc.rules)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, r := range tc.allow {
			if ok, _, _ := rs.Judge(r); !ok {
				t.Errorf("%s: %s %s %v denied", tc.name, r.Method, r.URL.RequestURI(), r.Header)
			}
		}
		for _, r := range tc.deny {
			if ok, _, _ := rs.Judge(r); ok {
				t.Errorf("%s: %s %s %v allowed", tc.name, r.Method, r.URL.RequestURI(), r.Header)
			}
		}
	}
}

// headerMatches: without a mismatch action a wrong value denies; the
// actions let the request through and say what to do to it.
func TestHeaderMatches(t *testing.T) {
	rule := func(a MismatchAction) HTTPRules {
		rs, err := CompileHTTPRules([]HTTPRule{{HeaderMatches: []HeaderMatch{{Name: "x-token", Value: "abc", Mismatch: a}}}})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	good, bad := request("GET", "http://a/", "X-Token", "abc"), request("GET", "http://a/", "X-Token", "xyz")
	if ok, e, l := rule(MismatchDeny).Judge(good); !ok || e != nil || l != nil {
		t.Errorf("matching header: %v %v %v", ok, e, l)
	}
	if ok, _, _ := rule(MismatchDeny).Judge(bad); ok {
		t.Error("a mismatch without an action was allowed")
	}
	if ok, _, l := rule(MismatchLog).Judge(bad); !ok || !slices.Equal(l, []string{"X-Token"}) {
		t.Errorf("LOG: %v %v", ok, l)
	}
	for _, tc := range []struct {
		action MismatchAction
		want   []string
	}{{MismatchAdd, []string{"xyz", "abc"}}, {MismatchReplace, []string{"abc"}}, {MismatchDelete, nil}} {
		r := request("GET", "http://a/", "X-Token", "xyz")
		ok, edits, _ := rule(tc.action).Judge(r)
		Apply(r.Header, edits)
		if !ok || !slices.Equal(r.Header.Values("X-Token"), tc.want) {
			t.Errorf("%s: allowed %v, header %v, want %v", tc.action, ok, r.Header.Values("X-Token"), tc.want)
		}
	}
}

func TestHTTPRulesErrors(t *testing.T) {
	for _, tc := range []struct {
		rule HTTPRule
		want string
	}{
		{HTTPRule{Path: "/a("}, "path"},
		{HTTPRule{Method: "GET|("}, "method"},
		{HTTPRule{Host: "[a"}, "host"},
		{HTTPRule{Headers: []string{": x"}}, "headers[0]"},
		{HTTPRule{HeaderMatches: []HeaderMatch{{Name: "a", Mismatch: "DROP"}}}, "headerMatches[0].mismatch"},
		{HTTPRule{HeaderMatches: []HeaderMatch{{Value: "a"}}}, "headerMatches[0].name"},
	} {
		_, err := CompileHTTPRules([]HTTPRule{{}, tc.rule})
		if err == nil || !strings.HasPrefix(err.Error(), "rules.http[1]."+tc.want) {
			t.Errorf("%+v: %v, want an error starting rules.http[1].%s", tc.rule, err, tc.want)
		}
		// A policy's validation names the field under its own path.
		if fe := (*FieldError)(nil); !errors.As(err, &fe) || fe.Field != tc.want {
			t.Errorf("%+v: %v, want a FieldError of %s", tc.rule, err, tc.want)
		}
	}
}
