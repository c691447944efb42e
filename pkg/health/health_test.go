package health

import (
	"errors"
	"testing"

	"github.com/cilium/hive/cell"
)

func TestRegistryScopes(t *testing.T) {
	r := NewRegistry()
	ipam := r.Scope("ipam")
	dp := r.Scope("datapath")
	sub := dp.NewScope("reconciler")
	if got := r.All(); len(got) != 3 || got[0].Scope != "datapath" || got[1].Scope != "datapath.reconciler" {
		t.Fatalf("scopes %+v", got)
	}
	if len(r.Degraded()) != 0 {
		t.Fatal("unknown counts as degraded")
	}
	ipam.OK("ready")
	sub.Degraded("sync", errors.New("map full"))
	bad := r.Degraded()
	if len(bad) != 1 || bad[0].Scope != "datapath.reconciler" || bad[0].Error != "map full" {
		t.Fatalf("degraded %+v", bad)
	}
	since := bad[0].Since
	sub.Degraded("sync", errors.New("map still full"))
	if again := r.Degraded(); again[0].Since != since || again[0].Error != "map still full" {
		t.Fatalf("a repeated level must keep its since: %+v", again)
	}
	sub.Close()
	if len(r.All()) != 2 || r.All()[1].Level != cell.StatusOK {
		t.Fatalf("after close %+v", r.All())
	}
}
