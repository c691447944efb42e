package datapath

import (
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

func TestConfigSocketLB(t *testing.T) {
	for _, tc := range []struct {
		name       string
		socketLB   bool
		cgroupRoot string
		ok         bool
	}{
		{"off", false, "", true},
		{"on", true, "/sys/fs/cgroup/unified/node", true},
		{"without a cgroup", true, "", false},
		{"relative cgroup", true, "node", false},
		{"relative cgroup, off", false, "node", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{BPFFSDir: "/sys/fs/bpf/x", NodeIPv4: netip.MustParseAddr("192.168.1.1"), Uplink: "eth0",
				Mode: spec.Native, SocketLB: tc.socketLB, CgroupRoot: tc.cgroupRoot}
			if err := c.validate(); (err == nil) != tc.ok {
				t.Errorf("validate: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
