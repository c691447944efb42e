package fqdn

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// Cilium's documented examples (docs: "DNS based", toFQDNs and
// rules.dns), and the edges of its wildcards.
func TestPatternExamples(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"*", []string{"cilium.io", "a.b.cilium.io.", ".", "A.IO"}, []string{"a..io", "sp ace.io"}},
		{"**.", []string{"cilium.io", "."}, nil},
		{"*.cilium.io", []string{"sub.cilium.io", "SUB.Cilium.IO.", "-.cilium.io", ".cilium.io"},
			[]string{"cilium.io", "a.b.cilium.io", "sub.cilium.io.evil.com"}},
		{"**.cilium.io", []string{"sub.cilium.io", "a.b.cilium.io", "x-1.y_2.cilium.io."},
			[]string{"cilium.io", ".cilium.io", "a..cilium.io", "sub.notcilium.io"}},
		{"sub*.cilium.io", []string{"sub.cilium.io", "subway.cilium.io"}, []string{"su.cilium.io", "a.sub.cilium.io"}},
		{"*cilium.io", []string{"cilium.io", "xcilium.io", "sub-cilium.io"}, []string{"a.cilium.io"}},
		{"api.*.example.com", []string{"api.eu.example.com", "api..example.com"}, []string{"api.eu.west.example.com"}},
		{"**.*.io", []string{"a.b.io", "a.b.c.io"}, []string{"b.io"}},
		{"cilium.io", []string{"cilium.io", "CILIUM.IO."}, []string{"www.cilium.io"}},
	} {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		for _, n := range tc.match {
			if !p.Matches(n) {
				t.Errorf("%q does not match %q", tc.pattern, n)
			}
		}
		for _, n := range tc.miss {
			if p.Matches(n) {
				t.Errorf("%q matches %q", tc.pattern, n)
			}
		}
	}
}

func TestBadSelectors(t *testing.T) {
	for _, s := range []string{"a b.io", "a/b", "ex?mple.io", strings.Repeat("a", 256)} {
		if _, err := ParsePattern(s); err == nil || !strings.Contains(err.Error(), "matchPattern") {
			t.Errorf("matchPattern %q: %v", s, err)
		}
	}
	for _, s := range []string{"*.io", "a b.io"} {
		if _, err := ParseName(s); err == nil || !strings.Contains(err.Error(), "matchName") {
			t.Errorf("matchName %q: %v", s, err)
		}
	}
	n, err := ParseName("Cilium.IO")
	if err != nil || !n.Matches("cilium.io.") || n.Matches("www.cilium.io") {
		t.Errorf("matchName Cilium.IO: %v", err)
	}
}

// reference is Cilium's documented translation of a pattern into a
// regular expression, written here for the test: the matcher must agree
// with it on every name.
var (
	refStars     = regexp.MustCompile(`^\*+\.?$`)
	refSubdomain = regexp.MustCompile(`^\*{2,}\[\.\]`)
	refStar      = regexp.MustCompile(`\*+`)
)

func reference(pattern string) *regexp.Regexp {
	const dns = "[-a-zA-Z0-9_]"
	p := strings.ToLower(strings.TrimSpace(pattern))
	if refStars.MatchString(p) {
		return regexp.MustCompile("(^(" + dns + "+[.])+$)|(^[.]$)")
	}
	if !strings.HasSuffix(p, ".") {
		p += "."
	}
	p = strings.ReplaceAll(p, ".", "[.]")
	p = refSubdomain.ReplaceAllString(p, "("+dns+"+([.]"+dns+"+){0,})[.]")
	p = refStar.ReplaceAllString(p, dns+"*")
	return regexp.MustCompile("^" + p + "$")
}

// Random patterns and names over a small alphabet, so that they meet.
func TestPatternAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(alphabet string, n int) string {
		var b strings.Builder
		for range r.IntN(n) + 1 {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 200000 {
		pat := pick("ab.*", 7)
		if r.IntN(4) == 0 {
			pat = "**." + pat
		}
		name := pick("ab.-", 8)
		p, err := ParsePattern(pat)
		if err != nil {
			t.Fatal(err)
		}
		want := reference(pat).MatchString(Normalize(name))
		if got := p.Matches(name); got != want {
			t.Fatalf("pattern %q name %q: match %v, reference %v", pat, name, got, want)
		}
	}
}
