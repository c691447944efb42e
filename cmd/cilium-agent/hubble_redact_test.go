package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/hubble"
	"github.com/cilium-go/cilium/pkg/monitor"
)

// hubbleAgentCells are the agent's cells with Hubble, the datapath in
// memory and a monitor that none feed, after first.
func hubbleAgentCells(first ...cell.Cell) []cell.Cell {
	return append(first, Infrastructure, ControlPlane, memDatapathCell(endpointtest.NewDatapath()),
		cell.Provide(monitor.NewHub), hubble.Cell)
}

// Both of Hubble's header lists at once stop the agent at startup,
// naming both flags, with Hubble's redaction off too, as Cilium's agent.
func TestAgentRefusesBothHubbleHeaderLists(t *testing.T) {
	cmd := newCommand(hubbleAgentCells()...)
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(writeConfigDir(t, map[string]string{"hubble-redact-http-headers-deny": "cookie"},
		append(baseArgs(t.TempDir()), "--hubble-redact-http-headers-allow=accept")))
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--hubble-redact-http-headers-allow and --hubble-redact-http-headers-deny") {
		t.Fatalf("error %v, want one naming both header lists", err)
	}
}

// The hubble-redact-* keys reach the agent from cilium-config as
// Cilium's chart writes them: a header list as names on lines of their
// own, which YAML folds into one line separated by spaces.
func TestAgentReadsHubbleRedactKeys(t *testing.T) {
	var got hubble.RedactConfig
	// The capture stops the agent before anything starts (hive keeps
	// only the error's text).
	const stop = "redaction config read"
	capture := cell.Invoke(func(c hubble.RedactConfig) error { got = c; return errors.New(stop) })
	cmd := newCommand(hubbleAgentCells(capture)...)
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(writeConfigDir(t, map[string]string{"hubble-redact-enabled": "true", "hubble-redact-http-urlquery": "true",
		"hubble-redact-http-userinfo": "false", "hubble-redact-http-headers-allow": "Accept Content-Type\n"}, baseArgs(t.TempDir())))
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), stop) {
		t.Fatalf("error %v, want the capture's", err)
	}
	if !got.HubbleRedactEnabled || !got.HubbleRedactHTTPURLQuery || got.HubbleRedactHTTPUserinfo ||
		!slices.Equal(got.HubbleRedactHTTPHeadersAllow, []string{"Accept", "Content-Type"}) || len(got.HubbleRedactHTTPHeadersDeny) != 0 {
		t.Errorf("config %+v", got)
	}
}
