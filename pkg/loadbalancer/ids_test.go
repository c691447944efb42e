package loadbalancer

import (
	"net/netip"
	"testing"
)

// A freed number is not handed out again before the counter comes round,
// numbers taken over after a restart are kept, and a full pool says so.
func TestPool(t *testing.T) {
	addr := func(i int) Addr {
		return Addr{Address: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), Port: 80, Protocol: 6}
	}
	p := newPool[uint16]()
	p.take(addr(1), 7) // restored
	if n, _ := p.get(addr(1)); n != 7 {
		t.Fatalf("restored address got %d, want 7", n)
	}
	n2, _ := p.get(addr(2))
	if n2 != 8 {
		t.Fatalf("a new address got %d, want 8 (after the highest restored)", n2)
	}
	p.release(addr(2))
	if n, _ := p.get(addr(3)); n == n2 {
		t.Fatalf("freed number %d handed out again at once", n2)
	}
	for i := 4; p.next != 0xffff; i++ {
		if _, err := p.get(addr(i)); err != nil {
			t.Fatal(err)
		}
	}
	// The counter comes round: the freed 8 is reused, 0 never.
	n, err := p.get(addr(70000))
	if err != nil || n == 0 {
		t.Fatalf("after the wrap: %d %v", n, err)
	}
	full := newPool[uint16]()
	for i := 1; i <= 0xffff; i++ {
		if _, err := full.get(addr(i + 100000)); err != nil {
			t.Fatalf("number %d: %v", i, err)
		}
	}
	if _, err := full.get(addr(7)); err == nil {
		t.Fatal("a 65536th reverse NAT index was handed out")
	}
}
