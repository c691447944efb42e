package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cilium-go/cilium/lab/internal/plan"
)

// `cilium connectivity test $(cilium-lab connectivity-test-flags)`: one line of
// flags, from the lab's plan.
func TestConnectivityTestFlagsCommand(t *testing.T) {
	o := plan.DefaultOptions()
	o.CNI = plan.CNIBridge
	o.StateDir = t.TempDir()
	p, err := plan.New(o)
	if err != nil {
		t.Fatal(err)
	}
	run := func() (string, error) {
		var out bytes.Buffer
		cmd := newRootCommand()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"--state-dir", o.StateDir, "connectivity-test-flags"})
		err := cmd.Execute()
		return out.String(), err
	}
	if out, err := run(); err == nil {
		t.Errorf("without a lab: %q, want an error", out)
	}
	if err := p.Save(); err != nil {
		t.Fatal(err)
	}
	out, err := run()
	if err != nil {
		t.Fatal(err)
	}
	want := "--external-target world.cilium-lab.test. --external-other-target other.world.cilium-lab.test. " +
		"--external-ip 192.0.2.1 --external-other-ip 192.0.2.2 --external-cidr 192.0.2.0/24 --curl-insecure\n"
	if out != want || strings.Count(out, "\n") != 1 {
		t.Errorf("printed %q, want %q", out, want)
	}
}
