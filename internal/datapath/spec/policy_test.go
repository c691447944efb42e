package spec

import "testing"

func TestPortPrefixesCoverRangeExactly(t *testing.T) {
	for _, r := range [][2]uint16{{0, 65535}, {1, 1}, {80, 80}, {8000, 8080}, {1, 1000}, {65535, 65535}, {1024, 65535}, {0, 0}} {
		covered := map[uint32]bool{}
		for _, pp := range PortPrefixes(r[0], r[1]) {
			size := uint32(1) << (16 - pp.Bits)
			if uint32(pp.Port)%size != 0 {
				t.Fatalf("range %v: block %+v not aligned", r, pp)
			}
			for p := uint32(pp.Port); p < uint32(pp.Port)+size; p++ {
				if covered[p] {
					t.Fatalf("range %v: port %d covered twice", r, p)
				}
				covered[p] = true
			}
		}
		if len(covered) != int(r[1])-int(r[0])+1 || !covered[uint32(r[0])] || !covered[uint32(r[1])] {
			t.Fatalf("range %v: covered %d ports", r, len(covered))
		}
	}
}

// Keys counts what PortPrefixes makes of a range, one key otherwise.
func TestPolicyEntryKeys(t *testing.T) {
	for _, c := range []struct {
		e    PolicyEntry
		want int
	}{
		{PolicyEntry{Direction: Egress}, 1},
		{PolicyEntry{Direction: Egress, Protocol: ProtoTCP}, 1},
		{PolicyEntry{Direction: Egress, Protocol: ProtoTCP, Port: 80}, 1},
		{PolicyEntry{Direction: Egress, Protocol: ProtoTCP, Port: 80, EndPort: 80}, 1},
		{PolicyEntry{Direction: Egress, Protocol: ProtoTCP, Port: 1, EndPort: 1000}, len(PortPrefixes(1, 1000))},
		{PolicyEntry{Direction: Egress, Protocol: ProtoTCP, Port: 1, EndPort: 65535}, 16},
	} {
		if got := c.e.Keys(); got != c.want {
			t.Errorf("%s: %d keys, want %d", c.e, got, c.want)
		}
	}
}
