package datapath

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// TestMapTableCoversObjects keeps mapTable honest: every map of every
// program object is in it under its C name, so that loading with the
// table's replacements shares all of them.
func TestMapTableCoversObjects(t *testing.T) {
	var specs lxcMapSpecs
	cs, err := loadLxc()
	must(t, err)
	must(t, cs.Assign(&specs))
	inTable := map[string]bool{}
	for _, d := range mapTable {
		if got := d.spec(&specs).Name; got != d.name {
			t.Errorf("mapTable row %s picks the spec of %s", d.name, got)
		}
		inTable[d.name] = true
	}
	for obj, load := range map[string]func() (map[string]bool, error){
		"lxc":         func() (map[string]bool, error) { return specMaps(loadLxc) },
		"node":        func() (map[string]bool, error) { return specMaps(loadNode) },
		"overlaytest": func() (map[string]bool, error) { return specMaps(loadOverlaytest) },
		"sock":        func() (map[string]bool, error) { return specMaps(loadSock) },
	} {
		names, err := load()
		must(t, err)
		for name := range names {
			if !inTable[name] {
				t.Errorf("%s: map %s is not in mapTable", obj, name)
			}
		}
	}
}

// specMaps are the names of an object's maps, without the sections that
// hold its global variables (.rodata, .bss, ...).
func specMaps(load func() (*ebpf.CollectionSpec, error)) (map[string]bool, error) {
	cs, err := load()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for name := range cs.Maps {
		if !strings.HasPrefix(name, ".") {
			out[name] = true
		}
	}
	return out, nil
}
