package nodedatapath

import (
	"strings"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/pkg/paths"
)

func TestConfigNamesFlag(t *testing.T) {
	good := DefaultConfig
	good.NodeIPv4 = "192.168.1.10"
	dc, err := good.Datapath(paths.DefaultConfig)
	if err != nil || dc.Mode != datapath.Tunnel || dc.BPFFSDir != "/sys/fs/bpf/cilium" || !dc.Masquerade {
		t.Fatalf("%+v %v", dc, err)
	}
	for flag, tweak := range map[string]func(*Config){
		"--node-ipv4":    func(c *Config) { c.NodeIPv4 = "fd00::1" },
		"--uplink":       func(c *Config) { c.Uplink = "" },
		"--routing-mode": func(c *Config) { c.RoutingMode = "vxlan" },
		"--tunnel-port":  func(c *Config) { c.TunnelPort = 0 },
		"--node-netns":   func(c *Config) { c.NodeNetNS = "netns/node1" },
	} {
		c := good
		tweak(&c)
		if _, err := c.Datapath(paths.DefaultConfig); err == nil || !strings.HasPrefix(err.Error(), flag) {
			t.Errorf("%s: %v", flag, err)
		}
	}
}
