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
		got := MasqueradePortRange(c.ephemeral, DefaultNodePorts)
		if got != c.want {
			t.Errorf("ephemeral %v: masquerade ports %v, want %v", c.ephemeral, got, c.want)
		}
	}
	// --node-port-range moves the hole.
	if got := MasqueradePortRange(DefaultEphemeralPorts, PortRange{2000, 2999}); got != (PortRange{3000, 32767}) {
		t.Errorf("NodePorts 2000-2999: masquerade ports %v, want 3000-32767", got)
	}
}
