package datapath

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
)

func TestParsePodDevice(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    PodDevice
		wantErr bool
	}{
		{"", PodDeviceVeth, false},
		{"veth", PodDeviceVeth, false},
		{"netkit", PodDeviceNetkit, false},
		{"netkit-l2", "", true},
		{"Veth", "", true},
	} {
		got, err := ParsePodDevice(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParsePodDevice(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// NewNode settles the pod device and refuses netkit with tc filters,
// which cannot attach to a netkit pair's pod side.
func TestConfigPodDevice(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := Config{BPFFSDir: "/sys/fs/bpf/x", NodeIPv4: netip.MustParseAddr("192.168.1.1"), Uplink: "eth0", Mode: Native}
	for _, tc := range []struct {
		name     string
		device   PodDevice
		legacyTC bool
		want     PodDevice
		wantErr  bool
	}{
		{"default", "", false, PodDeviceVeth, false},
		{"netkit", PodDeviceNetkit, false, PodDeviceNetkit, false},
		{"veth with tc filters", PodDeviceVeth, true, PodDeviceVeth, false},
		{"netkit with tc filters", PodDeviceNetkit, true, "", true},
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
