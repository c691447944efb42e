package datapath

import "testing"

func TestMasqueradePortRange(t *testing.T) {
	for _, c := range []struct{ ephemeral, want PortRange }{
		{DefaultEphemeralPorts, PortRange{1024, 29999}},
		{PortRange{1024, 65000}, PortRange{65001, 65535}},
		{PortRange{10000, 65535}, PortRange{1024, 9999}},
		{PortRange{40000, 40000}, PortRange{1024, 29999}},
		{PortRange{20000, 29999}, PortRange{32768, 65535}},
	} {
		got := MasqueradePortRange(c.ephemeral)
		if got != c.want {
			t.Errorf("ephemeral %v: masquerade ports %v, want %v", c.ephemeral, got, c.want)
		}
	}
}
