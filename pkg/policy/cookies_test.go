package policy

import (
	"slices"
	"testing"
)

func TestCookiesNameOriginSets(t *testing.T) {
	c := NewCookies()
	a := []Origin{{Kind: KindCNP, Namespace: "x", Name: "a"}}
	ab := []Origin{{Kind: KindCNP, Namespace: "x", Name: "a"}, {Kind: KindNetworkPolicy, Namespace: "x", Name: "b"}}
	if c.Of(nil) != 0 {
		t.Fatal("no origins must be cookie 0")
	}
	ca, cab := c.Of(a), c.Of(ab)
	if ca == 0 || cab == 0 || ca == cab {
		t.Fatalf("cookies %d and %d: want two distinct, non-zero", ca, cab)
	}
	if c.Of(slices.Clone(a)) != ca {
		t.Fatal("the same set got another cookie")
	}
	if got := c.Origins(cab); !slices.Equal(got, ab) {
		t.Fatalf("cookie %d names %v, want %v", cab, got, ab)
	}
	if c.Origins(0) != nil || c.Origins(cab+1) != nil {
		t.Fatal("an unknown cookie named rules")
	}
}
