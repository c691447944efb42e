package runtimeconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

func TestFromFlags(t *testing.T) {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.String("monitor-aggregation", "medium", "")
	fs.String("routing-mode", "native", "")
	fs.Int("tunnel-port", 8472, "")
	fs.Bool("kube-proxy-replacement", false, "")
	fs.Bool("bpf-lb-sock", true, "")
	fs.Bool("enable-ipv4-masquerade", true, "")
	fs.Bool("enable-ipv4", true, "")
	fs.Bool("enable-health-checking", true, "")
	fs.Bool("enable-endpoint-health-checking", true, "")
	if err := fs.Parse([]string{"--routing-mode=tunnel", "--monitor-aggregation=none"}); err != nil {
		t.Fatal(err)
	}
	c := FromFlags(fs, true)
	if c.MonitorAggregation != "none" || c.RoutingMode != "tunnel" || c.TunnelProtocol != "vxlan" || c.TunnelPort != 8472 ||
		!c.EnableK8sNetworkPolicy || c.EnableK8sClusterNetworkPolicy || !c.EnableHealthChecking || !c.EnableEndpointHealthChecking || c.EncryptNode ||
		c.KubeProxyReplacement != "false" || c.EnableSocketLB || !c.EnableBPFMasquerade || !c.EnableIPv4 || c.EnableIPv6 {
		t.Errorf("%+v", c)
	}
	if c := FromFlags(fs, false); c.EnableK8sNetworkPolicy || c.EnableEndpointHealthChecking || !c.EnableHealthChecking {
		t.Errorf("NetworkPolicy or a health endpoint without Kubernetes: %+v", c)
	}
	if err := fs.Parse([]string{"--enable-health-checking=false"}); err != nil {
		t.Fatal(err)
	}
	if c := FromFlags(fs, true); c.EnableHealthChecking || c.EnableEndpointHealthChecking {
		t.Errorf("health checking claimed when off: %+v", c)
	}
}

func TestWriteReplacesWhole(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "state")
	path := filepath.Join(dir, FileName)
	for _, mode := range []string{"medium", "none"} {
		if err := Write(path, Config{MonitorAggregation: mode}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil || got["MonitorAggregation"] != mode {
			t.Fatalf("%s: %v", b, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("left in %s: %v %v", dir, entries, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
}
