package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// allowList holds the skip reasons CI accepts: one regular expression a
// line, matched anywhere in the reason; `#` starts a comment line.
type allowList []*regexp.Regexp

func parseAllowList(r io.Reader) (allowList, error) {
	var out allowList
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		re, err := regexp.Compile(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, re)
	}
	return out, s.Err()
}

// allows reports whether the skip's reason matches a pattern.
func (a allowList) allows(s Skip) bool {
	for _, re := range a {
		if re.MatchString(s.Reason) {
			return true
		}
	}
	return false
}
