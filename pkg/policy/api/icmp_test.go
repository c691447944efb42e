package api

import (
	"encoding/json"
	"testing"
)

// An ICMP type is a number or a name, looked up in the field's family
// (IPv4 when none is given), as the connectivity suite writes them.
func TestICMPFieldTypeNumber(t *testing.T) {
	tests := []struct {
		doc  string
		want uint8
		bad  bool
	}{
		{doc: `{"family":"IPv4","type":8}`, want: 8},
		{doc: `{"family":"IPv6","type":128}`, want: 128},
		{doc: `{"type":"EchoRequest"}`, want: 8},
		{doc: `{"family":"IPv6","type":"EchoRequest"}`, want: 128},
		{doc: `{"family":"IPv6","type":"DestinationUnreachable"}`, want: 1},
		{doc: `{"type":"255"}`, want: 255},
		{doc: `{"type":0}`, want: 0},
		{doc: `{"type":256}`, bad: true},
		{doc: `{"type":-1}`, bad: true},
		{doc: `{"type":"Ping"}`, bad: true},
		{doc: `{"type":"PacketTooBig"}`, bad: true},
		{doc: `{"family":"IPv6","type":"Redirect"}`, bad: true},
		{doc: `{"family":"IPv5","type":8}`, bad: true},
	}
	for _, tt := range tests {
		var f ICMPField
		if err := json.Unmarshal([]byte(tt.doc), &f); err != nil {
			t.Fatalf("%s: %v", tt.doc, err)
		}
		got, err := f.TypeNumber()
		switch {
		case tt.bad && err == nil:
			t.Errorf("%s: type %d, want an error", tt.doc, got)
		case !tt.bad && err != nil:
			t.Errorf("%s: %v", tt.doc, err)
		case !tt.bad && got != tt.want:
			t.Errorf("%s: type %d, want %d", tt.doc, got, tt.want)
		}
		if errs := validateICMPs(nil, []ICMPRule{{Fields: []ICMPField{f}}}, false); (len(errs) > 0) != tt.bad {
			t.Errorf("%s: validation %v, want bad=%v", tt.doc, errs, tt.bad)
		}
	}
}
