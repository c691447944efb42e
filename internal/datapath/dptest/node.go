package dptest

import (
	"log/slog"
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
)

// StartNode starts a datapath node in native routing in the namespace
// ns, on an uplink eth0 with 192.168.77.1/24 that leads nowhere, with a
// bpffs of its own; it is torn down when the test ends. It needs root.
func StartNode(t testing.TB, ns string) *datapath.Node {
	t.Helper()
	if err := testnode.AddUplink(ns, "192.168.77.1/24"); err != nil {
		t.Fatal(err)
	}
	n, err := datapath.NewNode(datapath.Config{BPFFSDir: testnode.TempBPFFS(t), NetNS: ns,
		NodeIPv4: netip.MustParseAddr("192.168.77.1"), Uplink: "eth0", Mode: spec.Native},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Teardown(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	return n
}
