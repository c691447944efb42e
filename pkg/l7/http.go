// Package l7 is policy at layer 7: the HTTP rules of a policy's toPorts
// (rules.http), compiled into matchers that judge requests with Cilium's
// semantics. The proxy that will enforce them asks Rules.Judge of each
// request.
package l7

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"regexp/syntax"
	"strings"
)

// HTTPRule is one entry of rules.http, as a policy writes it. A request
// matches it when it matches every field given; an empty field matches
// everything.
type HTTPRule struct {
	// Method, Path and Host are regular expressions (RE2) that the whole
	// method, the whole request target (path and query) and the whole
	// Host header must match.
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	Host   string `json:"host,omitempty"`
	// Headers are header names ("X-Token") that must be present, or
	// names and values ("X-Token: abc", the colon optional) whose value
	// must be exactly that.
	Headers []string `json:"headers,omitempty"`
	// HeaderMatches compare a header with a value; one that does not
	// match denies the request, or with a mismatch action is let through
	// with the action applied.
	HeaderMatches []HeaderMatch `json:"headerMatches,omitempty"`
}

// HeaderMatch is one of rules.http's headerMatches.
type HeaderMatch struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	// Mismatch is what a request whose header does not match gets: ""
	// (denied), LOG (let through), ADD (the value added), DELETE (the
	// header removed), REPLACE (its value replaced).
	Mismatch MismatchAction `json:"mismatch,omitempty"`
}

// MismatchAction is a headerMatch's mismatch, Cilium's names.
type MismatchAction string

// The mismatch actions.
const (
	MismatchDeny    MismatchAction = ""
	MismatchLog     MismatchAction = "LOG"
	MismatchAdd     MismatchAction = "ADD"
	MismatchDelete  MismatchAction = "DELETE"
	MismatchReplace MismatchAction = "REPLACE"
)

// HTTPMatcher is a compiled HTTPRule.
type HTTPMatcher struct {
	method, path, host *regexp.Regexp
	present            []string          // canonical names
	exact              map[string]string // canonical name -> value
	matches            []HeaderMatch     // canonical names
}

// FieldError is a bad field of an HTTPRule. Field names it as a policy
// does ("path", "headers[0]", "headerMatches[1].mismatch"), so that the
// policy's validation can name it under its own path.
type FieldError struct {
	Field string
	Value string // the field's value; empty when it is missing
	Err   error
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return e.Field + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s %q: %v", e.Field, e.Value, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// CompileHTTP compiles r; a bad field is named in the error (a
// *FieldError), for the policy's status.
func CompileHTTP(r HTTPRule) (*HTTPMatcher, error) {
	m := &HTTPMatcher{exact: map[string]string{}}
	for _, f := range []struct {
		name, expr string
		into       **regexp.Regexp
	}{{"method", r.Method, &m.method}, {"path", r.Path, &m.path}, {"host", r.Host, &m.host}} {
		if f.expr == "" {
			continue
		}
		re, err := regexp.Compile("^(?:" + f.expr + ")$")
		if err != nil {
			// Show the expression as the policy wrote it, not anchored.
			if _, perr := syntax.Parse(f.expr, syntax.Perl); perr != nil {
				err = perr
			}
			return nil, &FieldError{Field: f.name, Value: f.expr, Err: err}
		}
		*f.into = re
	}
	for i, h := range r.Headers {
		name, value, hasValue := strings.Cut(strings.TrimSpace(h), " ")
		name = strings.TrimRight(name, ":")
		if name == "" {
			return nil, &FieldError{Field: fmt.Sprintf("headers[%d]", i), Value: h, Err: errors.New("no header name")}
		}
		name = http.CanonicalHeaderKey(name)
		if hasValue {
			m.exact[name] = value
		} else {
			m.present = append(m.present, name)
		}
	}
	for i, h := range r.HeaderMatches {
		switch h.Mismatch {
		case MismatchDeny, MismatchLog, MismatchAdd, MismatchDelete, MismatchReplace:
		default:
			return nil, &FieldError{Field: fmt.Sprintf("headerMatches[%d].mismatch", i), Value: string(h.Mismatch),
				Err: errors.New("want LOG, ADD, DELETE or REPLACE")}
		}
		if h.Name == "" {
			return nil, &FieldError{Field: fmt.Sprintf("headerMatches[%d].name", i), Err: errors.New("required")}
		}
		h.Name = http.CanonicalHeaderKey(h.Name)
		m.matches = append(m.matches, h)
	}
	return m, nil
}

// Edit is what a mismatch action does to a request that a rule lets
// through: Delete the header Name, or set it to Value (Add keeps the
// values it had).
type Edit struct {
	Name, Value string
	Add, Delete bool
}

// Match says whether the request matches the rule; for one that does,
// the edits its headerMatches' mismatch actions make (Apply) and the
// names of the headers whose mismatch is only logged.
func (m *HTTPMatcher) Match(req *http.Request) (ok bool, edits []Edit, logged []string) {
	if m.method != nil && !m.method.MatchString(req.Method) {
		return false, nil, nil
	}
	if m.path != nil && !m.path.MatchString(req.URL.RequestURI()) {
		return false, nil, nil
	}
	if m.host != nil && !m.host.MatchString(req.Host) {
		return false, nil, nil
	}
	for _, name := range m.present {
		if _, ok := req.Header[name]; !ok {
			return false, nil, nil
		}
	}
	for name, value := range m.exact {
		if !hasValue(req.Header, name, value) {
			return false, nil, nil
		}
	}
	for _, h := range m.matches {
		if hasValue(req.Header, h.Name, h.Value) {
			continue
		}
		switch h.Mismatch {
		case MismatchDeny:
			return false, nil, nil
		case MismatchLog:
			logged = append(logged, h.Name)
		case MismatchAdd:
			edits = append(edits, Edit{Name: h.Name, Value: h.Value, Add: true})
		case MismatchDelete:
			edits = append(edits, Edit{Name: h.Name, Delete: true})
		case MismatchReplace:
			edits = append(edits, Edit{Name: h.Name, Value: h.Value})
		}
	}
	return true, edits, logged
}

// hasValue says whether one of the header's values is value.
func hasValue(h http.Header, name, value string) bool {
	for _, v := range h[name] {
		if v == value {
			return true
		}
	}
	return false
}

// Apply makes the edits to the request's headers.
func Apply(h http.Header, edits []Edit) {
	for _, e := range edits {
		switch {
		case e.Delete:
			h.Del(e.Name)
		case e.Add:
			h.Add(e.Name, e.Value)
		default:
			h.Set(e.Name, e.Value)
		}
	}
}

// HTTPRules are the HTTP rules of one port of a policy: a request is
// allowed when it matches one of them, and an empty rule matches every
// request (Cilium's visibility without enforcement). A port whose rules
// are all empty lists has no L7 rules at all, as in Cilium: it is not
// redirected, so Judge is never asked with no rules (it would allow
// nothing).
type HTTPRules []*HTTPMatcher

// CompileHTTPRules compiles rules, naming the first bad one's index.
func CompileHTTPRules(rules []HTTPRule) (HTTPRules, error) {
	out := make(HTTPRules, 0, len(rules))
	for i, r := range rules {
		m, err := CompileHTTP(r)
		if err != nil {
			return nil, fmt.Errorf("rules.http[%d].%w", i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Judge says whether rs allow the request, with the edits and logged
// mismatches of the first rule that does.
func (rs HTTPRules) Judge(req *http.Request) (allowed bool, edits []Edit, logged []string) {
	for _, m := range rs {
		if ok, e, l := m.Match(req); ok {
			return true, e, l
		}
	}
	return false, nil, nil
}
