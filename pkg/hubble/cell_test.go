package hubble

import (
	"strings"
	"testing"
)

func TestConfigNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 4096}, "--hubble-event-buffer-capacity"},
		{Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 0}, "--hubble-event-buffer-capacity"},
		{Config{EnableHubble: true, HubbleSocketPath: "h.sock", HubbleEventBufferCapacity: 4095}, "--hubble-socket-path"},
		{Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 4095, HubbleMetrics: "flow dns",
			HubbleMetricsServer: ":9965"}, `--hubble-metrics: metric "dns"`},
		{Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 4095, HubbleMetrics: "flow"},
			"--hubble-metrics-server"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.c, err, tc.want)
		}
	}
	if err := (Config{HubbleEventBufferCapacity: 3}).Validate(); err != nil {
		t.Errorf("flags of a disabled Hubble are not checked: %v", err)
	}
	if err := DefaultConfig.Validate(); err != nil {
		t.Error(err)
	}
	on := DefaultConfig
	on.EnableHubble = true
	if err := on.Validate(); err != nil {
		t.Error(err)
	}
}
