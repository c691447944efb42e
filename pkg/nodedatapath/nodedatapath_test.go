package nodedatapath

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	"github.com/cilium-go/cilium/pkg/paths"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
)

func TestConfigNamesFlag(t *testing.T) {
	good := DefaultConfig
	good.NodeIPv4 = "192.168.1.10"
	dc, err := good.Datapath(paths.DefaultConfig, loadbalancer.DefaultConfig, policyagent.DefaultMapConfig)
	if err != nil || dc.Mode != spec.Tunnel || dc.BPFFSDir != "/sys/fs/bpf/cilium" || !dc.Masquerade || !dc.LegacyRouting ||
		dc.PodDevice != podlink.DeviceVeth {
		t.Fatalf("%+v %v", dc, err)
	}
	if want := (spec.Traces{Aggregation: spec.AggregationMedium, ReportFlags: spec.DefaultReportFlags,
		ReportInterval: 5 * time.Second}); dc.Traces != want {
		t.Fatalf("traces %+v, want Cilium's defaults %+v", dc.Traces, want)
	}
	nk := good
	nk.DatapathMode = "netkit"
	if dc, err := nk.Datapath(paths.DefaultConfig, loadbalancer.DefaultConfig, policyagent.DefaultMapConfig); err != nil || dc.PodDevice != podlink.DeviceNetkit || !dc.LegacyRouting {
		t.Fatalf("netkit: %+v %v", dc, err)
	}
	for flag, tweak := range map[string]func(*Config){
		"--node-ipv4":                           func(c *Config) { c.NodeIPv4 = "fd00::1" },
		"--uplink":                              func(c *Config) { c.Uplink = "" },
		"--enable-ipv4=false":                   func(c *Config) { c.EnableIPv4 = false },
		"--enable-ipv4=true --enable-ipv6=true": func(c *Config) { c.EnableIPv6 = true },
		"--routing-mode":                        func(c *Config) { c.RoutingMode = "vxlan" },
		"--tunnel-port":                         func(c *Config) { c.TunnelPort = 0 },
		"--node-netns":                          func(c *Config) { c.NodeNetNS = "netns/node1" },
		"--datapath-mode":                       func(c *Config) { c.DatapathMode = "netkit-l2" },
		"--monitor-aggregation:":                func(c *Config) { c.MonitorAggregation = "high" },
		"--monitor-aggregation-flags":           func(c *Config) { c.MonitorAggregationFlags = []string{"syn", "psh-ack"} },
		"--monitor-aggregation-interval":        func(c *Config) { c.MonitorAggregationInterval = 500 * time.Millisecond },
	} {
		c := good
		tweak(&c)
		if _, err := c.Datapath(paths.DefaultConfig, loadbalancer.DefaultConfig, policyagent.DefaultMapConfig); err == nil || !strings.HasPrefix(err.Error(), flag) {
			t.Errorf("%s: %v", flag, err)
		}
	}

	// The kube-proxy replacement balances sockets of --cgroup-root's
	// processes, and sizes the service maps.
	kpr := loadbalancer.DefaultConfig
	kpr.KubeProxyReplacement = true
	kpr.BPFLBMapMax = 4096
	kpr.NodePortRange = "20000-22767"
	if _, err := good.Datapath(paths.DefaultConfig, kpr, policyagent.DefaultMapConfig); err == nil || !strings.HasPrefix(err.Error(), "--bpf-lb-sock") {
		t.Errorf("socket LB without --cgroup-root: %v", err)
	}
	withCgroup := good
	withCgroup.CgroupRoot = "/sys/fs/cgroup/lab/node1"
	if dc, err := withCgroup.Datapath(paths.DefaultConfig, kpr, policyagent.DefaultMapConfig); err != nil || !dc.SocketLB || dc.CgroupRoot != withCgroup.CgroupRoot || dc.LBMapMax != 4096 ||
		dc.NodePorts != (datapath.PortRange{Min: 20000, Max: 22767}) || dc.PolicyMapMax != 16384 {
		t.Errorf("socket LB: %+v %v", dc, err)
	}
	kpr.BPFLBSock = false
	if dc, err := good.Datapath(paths.DefaultConfig, kpr, policyagent.DefaultMapConfig); err != nil || dc.SocketLB {
		t.Errorf("--bpf-lb-sock=false: %+v %v", dc, err)
	}
	kpr.BPFLBMode = "dsr"
	if _, err := good.Datapath(paths.DefaultConfig, kpr, policyagent.DefaultMapConfig); err == nil || !strings.HasPrefix(err.Error(), "--bpf-lb-mode") {
		t.Errorf("--bpf-lb-mode dsr: %v", err)
	}
	relative := good
	relative.CgroupRoot = "lab/node1"
	if _, err := relative.Datapath(paths.DefaultConfig, loadbalancer.DefaultConfig, policyagent.DefaultMapConfig); err == nil || !strings.HasPrefix(err.Error(), "--cgroup-root") {
		t.Errorf("relative --cgroup-root: %v", err)
	}
}

func TestIPCacheModelsSorted(t *testing.T) {
	got := models.IPCacheEntries(map[netip.Prefix]spec.IPCacheEntry{
		netip.MustParsePrefix("10.0.2.0/24"): {Identity: 6},
		netip.MustParsePrefix("10.0.1.7/32"): {Identity: 4242, TunnelEndpoint: netip.MustParseAddr("192.168.1.2")},
		netip.MustParsePrefix("10.0.2.0/32"): {Identity: 1},
	})
	want := []models.IPCacheEntry{
		{Prefix: "10.0.1.7/32", Identity: 4242, TunnelEndpoint: "192.168.1.2"},
		{Prefix: "10.0.2.0/24", Identity: 6},
		{Prefix: "10.0.2.0/32", Identity: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// A table whose connections come and go fast is collected sooner, so that
// expired entries never fill the LRU map; a quiet one waits longer again,
// up to the flag.
func TestNextConntrackGC(t *testing.T) {
	const capacity = 65536
	for _, c := range []struct {
		name          string
		last, longest time.Duration
		deleted       int
		want          time.Duration
	}{
		{"nothing expired: twice the wait", 10 * time.Second, time.Minute, 0, 20 * time.Second},
		{"up to the flag", 40 * time.Second, time.Minute, 0, time.Minute},
		{"a quarter of the table expired: same wait", 20 * time.Second, time.Minute, capacity / 4, 20 * time.Second},
		{"the whole table expired: a quarter of the wait", 20 * time.Second, time.Minute, capacity, 5 * time.Second},
		{"never below the floor", 10 * time.Second, time.Minute, capacity, 5 * time.Second},
		{"a flag below the floor wins", 100 * time.Millisecond, 100 * time.Millisecond, capacity, 100 * time.Millisecond},
	} {
		if got := nextConntrackGC(c.last, c.longest, c.deleted, capacity); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
