// Package fqdn is DNS-aware policy: the names and patterns that toFQDNs
// selectors and DNS rules (rules.dns) match, with Cilium's semantics.
package fqdn

import (
	"fmt"
	"strings"
)

// MaxLength bounds a matchName or matchPattern, as Cilium bounds it: a
// name of the DNS is at most 255 characters.
const MaxLength = 255

// Normalize is the form names are compared in: lower case, fully
// qualified (with the root's trailing dot), without surrounding spaces.
// The empty name is the root, ".".
func Normalize(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// dnsChar says whether c may stand for a wildcard: a letter, a digit, '-'
// or '_' (DNS names in practice; a wildcard never matches a dot).
func dnsChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// checkChars names the first character of s that is not a DNS
// character, a dot, or (with stars) a star, and a length over MaxLength.
func checkChars(field, s string, stars bool) error {
	if len(s) > MaxLength {
		return fmt.Errorf("%s %q: longer than %d characters", field, s, MaxLength)
	}
	allowed := "letters, digits, '-', '_' and '.'"
	if stars {
		allowed += " and '*'"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !dnsChar(c) && c != '.' && (!stars || c != '*') {
			return fmt.Errorf("%s %q: character %q at %d: only %s are allowed", field, s, c, i, allowed)
		}
	}
	return nil
}

// Name is a matchName: one name, matched whole, case aside.
type Name struct{ name string }

// ParseName reads a matchName: letters, digits, '-', '_' and '.', at most
// MaxLength characters.
func ParseName(s string) (Name, error) {
	if err := checkChars("matchName", strings.TrimSpace(s), false); err != nil {
		return Name{}, err
	}
	return Name{name: Normalize(s)}, nil
}

// Matches says whether name is the selector's name.
func (n Name) Matches(name string) bool { return Normalize(name) == n.name }

func (n Name) String() string { return n.name }

// Pattern is a matchPattern, Cilium's wildcards:
//   - a pattern of stars alone ("*", "**", with or without a trailing
//     dot) matches every name;
//   - a leading "**." (two or more stars, then a dot) stands for one or
//     more whole labels: "**.cilium.io" matches "a.cilium.io" and
//     "a.b.cilium.io", never "cilium.io";
//   - any other run of stars stands for zero or more letters, digits, '-'
//     or '_' within one label: "*.cilium.io" matches "a.cilium.io" but
//     neither "cilium.io" nor "a.b.cilium.io", and "sub*.cilium.io"
//     matches "sub.cilium.io" and "subway.cilium.io".
//
// Matching ignores case, and names and patterns are fully qualified.
type Pattern struct {
	all bool
	// subdomains: the leading "**." (one or more labels before rest).
	subdomains bool
	// rest is the pattern after any leading "**.", normalized.
	rest string
	text string
}

// ParsePattern reads a matchPattern: letters, digits, '-', '_', '.' and
// '*', at most MaxLength characters.
func ParsePattern(s string) (Pattern, error) {
	t := strings.TrimSpace(s)
	if err := checkChars("matchPattern", t, true); err != nil {
		return Pattern{}, err
	}
	p := Pattern{text: t}
	if core := strings.TrimSuffix(t, "."); core != "" && strings.Trim(core, "*") == "" {
		p.all = true // "*", "**.", ...
		return p, nil
	}
	rest := t
	if after := strings.TrimLeft(t, "*"); len(t)-len(after) >= 2 && strings.HasPrefix(after, ".") {
		p.subdomains = true
		rest = after[1:]
	}
	p.rest = Normalize(rest)
	return p, nil
}

func (p Pattern) String() string { return p.text }

// Matches says whether the pattern matches name.
func (p Pattern) Matches(name string) bool {
	name = Normalize(name)
	if p.all {
		return validName(name)
	}
	if !p.subdomains {
		return globLabels(p.rest, name)
	}
	// One or more whole labels of DNS characters, then the rest. Each
	// dot of the name may end the labels the wildcard stands for.
	for i := 0; i < len(name); i++ {
		if name[i] != '.' {
			continue
		}
		if !validLabels(name[:i]) {
			return false
		}
		if globLabels(p.rest, name[i+1:]) {
			return true
		}
	}
	return false
}

// validName says whether name (normalized) is the root or labels of DNS
// characters, each ended by a dot: what a pattern of stars alone matches.
func validName(name string) bool {
	return name == "." || validLabels(strings.TrimSuffix(name, "."))
}

// validLabels says whether s is one or more non-empty labels of DNS
// characters joined by dots.
func validLabels(s string) bool {
	if s == "" {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" {
			return false
		}
		for i := 0; i < len(l); i++ {
			if !dnsChar(l[i]) {
				return false
			}
		}
	}
	return true
}

// globLabels matches name against pattern, both normalized, label by
// label: a run of stars in a pattern label stands for zero or more DNS
// characters of the name's label.
func globLabels(pattern, name string) bool {
	ps, ns := strings.Split(pattern, "."), strings.Split(name, ".")
	if len(ps) != len(ns) {
		return false
	}
	for i := range ps {
		if !globLabel(ps[i], ns[i]) {
			return false
		}
	}
	return true
}

// globLabel matches one label: the classic wildcard walk, remembering the
// last star to fall back to.
func globLabel(p, s string) bool {
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && p[pi] == s[si]:
			pi++
			si++
		case star >= 0 && dnsChar(s[mark]):
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
