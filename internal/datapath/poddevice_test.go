package datapath

import (
	"log/slog"
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/podlink"
)

func TestParsePodDevice(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    podlink.Device
		wantErr bool
	}{
		{"", podlink.DeviceVeth, false},
		{"veth", podlink.DeviceVeth, false},
		{"netkit", podlink.DeviceNetkit, false},
		{"netkit-l2", "", true},
		{"Veth", "", true},
	} {
		got, err := podlink.ParseDevice(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("podlink.ParseDevice(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// NewNode settles the pod device and refuses netkit with tc filters,
// which cannot attach to a netkit pair's pod side.
func TestConfigPodDevice(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	base := Config{BPFFSDir: "/sys/fs/bpf/x", NodeIPv4: netip.MustParseAddr("192.168.1.1"), Uplink: "eth0", Mode: spec.Native}
	for _, tc := range []struct {
		name     string
		device   podlink.Device
		legacyTC bool
		want     podlink.Device
		wantErr  bool
	}{
		{"default", "", false, podlink.DeviceVeth, false},
		{"netkit", podlink.DeviceNetkit, false, podlink.DeviceNetkit, false},
		{"veth with tc filters", podlink.DeviceVeth, true, podlink.DeviceVeth, false},
		{"netkit with tc filters", podlink.DeviceNetkit, true, "", true},
		{"unknown", "macvlan", false, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.PodDevice, cfg.LegacyTC = tc.device, tc.legacyTC
			n, err := NewNode(cfg, log)
			if (err != nil) != tc.wantErr {
				t.Fatalf("NewNode: %v, want error %v", err, tc.wantErr)
			}
			if err == nil && n.cfg.PodDevice != tc.want {
				t.Errorf("pod device %q, want %q", n.cfg.PodDevice, tc.want)
			}
		})
	}
}
