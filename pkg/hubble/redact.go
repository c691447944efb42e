package hubble

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/hubble/parser"
)

// RedactConfig has Cilium's flags and defaults for what L7 flows leave
// out. As in Cilium, without --hubble-redact-enabled the other flags
// count for nothing and only a URL's password is redacted.
type RedactConfig struct {
	HubbleRedactEnabled          bool     `mapstructure:"hubble-redact-enabled"`
	HubbleRedactHTTPURLQuery     bool     `mapstructure:"hubble-redact-http-urlquery"`
	HubbleRedactHTTPUserinfo     bool     `mapstructure:"hubble-redact-http-userinfo"`
	HubbleRedactHTTPHeadersAllow []string `mapstructure:"hubble-redact-http-headers-allow"`
	HubbleRedactHTTPHeadersDeny  []string `mapstructure:"hubble-redact-http-headers-deny"`
}

// DefaultRedactConfig: off; the password redacted once on, as Cilium's.
var DefaultRedactConfig = RedactConfig{HubbleRedactHTTPUserinfo: true}

// Flags implements cell.Flagger.
func (d RedactConfig) Flags(fs *pflag.FlagSet) {
	fs.Bool("hubble-redact-enabled", d.HubbleRedactEnabled,
		"redact L7 HTTP flows as the other --hubble-redact-* flags say (every header's value, without a header list); off: a URL's password only")
	fs.Bool("hubble-redact-http-urlquery", d.HubbleRedactHTTPURLQuery, "with --hubble-redact-enabled, leave the query and fragment out of HTTP flows' URLs")
	fs.Bool("hubble-redact-http-userinfo", d.HubbleRedactHTTPUserinfo, "with --hubble-redact-enabled, redact the password in HTTP flows' URLs")
	fs.StringSlice("hubble-redact-http-headers-allow", d.HubbleRedactHTTPHeadersAllow,
		"with --hubble-redact-enabled, the HTTP headers (any case) whose values flows keep; all others are redacted")
	fs.StringSlice("hubble-redact-http-headers-deny", d.HubbleRedactHTTPHeadersDeny,
		"with --hubble-redact-enabled, the HTTP headers (any case) whose values are redacted; all others are kept")
}

// Validate refuses both header lists at once, even with redaction off,
// as Cilium's agent does.
func (c RedactConfig) Validate() error {
	if len(c.HubbleRedactHTTPHeadersAllow) > 0 && len(c.HubbleRedactHTTPHeadersDeny) > 0 {
		return errors.New("--hubble-redact-http-headers-allow and --hubble-redact-http-headers-deny: give one or neither, not both")
	}
	return nil
}

// Redaction is what the flags ask the parser to leave out.
func (c RedactConfig) Redaction() parser.Redaction {
	if !c.HubbleRedactEnabled {
		return parser.DefaultRedaction
	}
	r := parser.Redaction{Userinfo: c.HubbleRedactHTTPUserinfo, Query: c.HubbleRedactHTTPURLQuery}
	switch {
	case len(c.HubbleRedactHTTPHeadersAllow) > 0:
		r.Headers = parser.HeadersExcept(c.HubbleRedactHTTPHeadersAllow)
	case len(c.HubbleRedactHTTPHeadersDeny) > 0:
		r.Headers = parser.OnlyHeaders(c.HubbleRedactHTTPHeadersDeny)
	default:
		r.Headers = parser.AllHeaders()
	}
	return r
}
