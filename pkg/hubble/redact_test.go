package hubble

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/hubble/parser"
)

// The flags' defaults are Cilium's, and what they ask of the parser is
// Cilium's: nothing but the password while redaction is off, whatever
// the other flags say; once on, each flag counts, and every header's
// value goes without a list.
func TestRedactConfig(t *testing.T) {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	DefaultRedactConfig.Flags(fs)
	for name, want := range map[string]string{"hubble-redact-enabled": "false", "hubble-redact-http-urlquery": "false",
		"hubble-redact-http-userinfo": "true", "hubble-redact-http-headers-allow": "[]", "hubble-redact-http-headers-deny": "[]"} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s defaults to %s, want %s", name, got, want)
		}
	}

	on := func(tweak func(*RedactConfig)) RedactConfig {
		c := DefaultRedactConfig
		c.HubbleRedactEnabled = true
		tweak(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		c    RedactConfig
		want parser.Redaction
	}{
		{"default", DefaultRedactConfig, parser.Redaction{Userinfo: true}},
		{"off: the other flags count for nothing", RedactConfig{HubbleRedactHTTPURLQuery: true, HubbleRedactHTTPHeadersDeny: []string{"cookie"}},
			parser.Redaction{Userinfo: true}},
		{"on", on(func(*RedactConfig) {}), parser.Redaction{Userinfo: true, Headers: parser.AllHeaders()}},
		{"on, no password redaction", on(func(c *RedactConfig) { c.HubbleRedactHTTPUserinfo = false }),
			parser.Redaction{Headers: parser.AllHeaders()}},
		{"on, query", on(func(c *RedactConfig) { c.HubbleRedactHTTPURLQuery = true }),
			parser.Redaction{Userinfo: true, Query: true, Headers: parser.AllHeaders()}},
		{"on, allow", on(func(c *RedactConfig) { c.HubbleRedactHTTPHeadersAllow = []string{"Accept"} }),
			parser.Redaction{Userinfo: true, Headers: parser.HeadersExcept([]string{"accept"})}},
		{"on, deny", on(func(c *RedactConfig) { c.HubbleRedactHTTPHeadersDeny = []string{"Cookie"} }),
			parser.Redaction{Userinfo: true, Headers: parser.OnlyHeaders([]string{"cookie"})}},
	} {
		if got := tc.c.Redaction(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Both header lists at once stop startup naming both flags, with
// redaction off too, as in Cilium; one list alone is fine.
func TestRedactConfigRefusesBothLists(t *testing.T) {
	both := RedactConfig{HubbleRedactHTTPHeadersAllow: []string{"accept"}, HubbleRedactHTTPHeadersDeny: []string{"cookie"}}
	for _, enabled := range []bool{false, true} {
		both.HubbleRedactEnabled = enabled
		err := both.Validate()
		if err == nil || !strings.Contains(err.Error(), "--hubble-redact-http-headers-allow") || !strings.Contains(err.Error(), "--hubble-redact-http-headers-deny") {
			t.Errorf("enabled %v: %v, want an error naming both flags", enabled, err)
		}
	}
	for _, c := range []RedactConfig{DefaultRedactConfig, {HubbleRedactHTTPHeadersAllow: []string{"accept"}}, {HubbleRedactHTTPHeadersDeny: []string{"cookie"}}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
