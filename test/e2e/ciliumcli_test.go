package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var ciliumCLI = flag.String("cilium-cli", "", "Cilium's cilium-cli binary (e.g. built from github.com/cilium/cilium-cli); empty: the tests that run it skip")

// ansi matches the terminal's colour codes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestPrivilegedCiliumCLIStatus: Cilium's own cilium-cli reads cilium-go's
// agents. cilium status execs `cilium status -o json` and `cilium endpoint
// list -o json` in every agent pod and decodes them with Cilium's models:
// it says the agents are OK and counts the pods they manage.
func TestPrivilegedCiliumCLIStatus(t *testing.T) {
	if *ciliumCLI == "" {
		t.Skip("no -cilium-cli: Cilium's cilium-cli binary is not part of this repository")
	}
	// The lab installs cilium-go from install/kubernetes: the cilium
	// DaemonSet, the operator and the relay are the pods cilium-cli asks.
	lab := StartLab(t, "dbgl", "--nodes", "2", "--cni=cilium")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, *ciliumCLI, "status", "--wait", "--wait-duration", "3m")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+lab.Kubeconfig, "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := ansi.ReplaceAllString(out.String(), "")
	t.Logf("cilium status:\n%s", text)
	if err != nil {
		t.Fatalf("cilium status: %v", err)
	}
	for _, want := range []*regexp.Regexp{regexp.MustCompile(`Cilium:\s+OK`), regexp.MustCompile(`Operator:\s+OK`),
		regexp.MustCompile(`Hubble Relay:\s+OK`), regexp.MustCompile(`DaemonSet\s+cilium\s.*Ready: 2/2`)} {
		if !want.MatchString(text) {
			t.Errorf("cilium status says nothing like %s", want)
		}
	}
	// Every pod of the cluster's pod network (CoreDNS, the relay) is an
	// endpoint of an agent.
	if m := regexp.MustCompile(`Cluster Pods:\s+(\d+)/(\d+) managed by Cilium`).FindStringSubmatch(text); m == nil || m[1] != m[2] || m[1] == "0" {
		t.Errorf("cilium status counts the pods as %v, want all of them managed", m)
	}
	if strings.Contains(text, "Errors:") || strings.Contains(text, "Warnings:") {
		t.Errorf("cilium status reports errors or warnings")
	}

	// What cilium-cli's connectivity test asks the agent pod.
	pod := strings.Fields(lab.Kubectl("-n", "kube-system", "get", "pods", "-l", "k8s-app=cilium", "-o", "name"))[0]
	exec := func(args ...string) string {
		return lab.Kubectl(append([]string{"-n", "kube-system", "exec", pod, "-c", "cilium-agent", "--"}, args...)...)
	}
	if v := exec("cilium", "version", "-o", "jsonpath={$.Daemon.Version}"); !strings.HasPrefix(v, "1.20.2") {
		t.Errorf("version %q", v)
	}
	if rev := strings.Trim(exec("cilium", "policy", "get", "-o", "jsonpath='{.revision}'"), "'\n"); rev == "" || rev == "0" {
		t.Errorf("policy revision %q", rev)
	}
	// The features the connectivity test detects from the agent's runtime
	// configuration (the lab's agents run with Cilium's default
	// aggregation, Kubernetes and health checking).
	var cfg struct {
		MonitorAggregation                                  string
		EnableICMPRules, EnableK8sNetworkPolicy             bool
		EnableHealthChecking, EnableK8sClusterNetworkPolicy bool
	}
	raw := exec("cat", "/var/run/cilium/state/agent-runtime-config.json")
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("runtime config %q: %v", raw, err)
	}
	if cfg.MonitorAggregation != "medium" || !cfg.EnableICMPRules || !cfg.EnableK8sNetworkPolicy ||
		!cfg.EnableHealthChecking || cfg.EnableK8sClusterNetworkPolicy {
		t.Errorf("runtime config %s", raw)
	}
}

// TestPrivilegedCiliumConnectivityTest: Cilium's own validation of an
// install, cilium-cli's `cilium connectivity test`, passes against
// cilium-go. Its tests of features cilium-go does not claim in
// cilium-config and the runtime configuration (L7 proxy, encryption,
// egress gateway...) skip themselves; every other one must pass. Its
// tests of the world reach the lab's (cilium-lab
// connectivity-test-flags).
func TestPrivilegedCiliumConnectivityTest(t *testing.T) {
	if *ciliumCLI == "" {
		t.Skip("no -cilium-cli: Cilium's cilium-cli binary is not part of this repository")
	}
	lab := StartLab(t, "ctl", "--nodes", "2", "--cni=cilium")
	flags, err := lab.run("cilium-lab", "connectivity-test-flags", "--state-dir", lab.StateDir)
	if err != nil {
		t.Fatalf("connectivity-test-flags: %v\n%s", err, flags)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	args := append([]string{"connectivity", "test"}, strings.Fields(flags)...)
	cmd := exec.CommandContext(ctx, *ciliumCLI, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+lab.Kubeconfig, "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	text := ansi.ReplaceAllString(out.String(), "")
	t.Logf("cilium %s:\n%s", strings.Join(args, " "), text)
	if err != nil {
		t.Fatalf("cilium connectivity test: %v", err)
	}
	// "✅ [cilium-test-1] All 55 tests (408 actions) successful, 77 tests
	// skipped, 0 scenarios skipped." A run of no action proves nothing.
	m := regexp.MustCompile(`All (\d+) tests \((\d+) actions\) successful`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("cilium connectivity test does not say all its tests passed")
	}
	if tests, _ := strconv.Atoi(m[1]); tests < 40 {
		t.Errorf("only %s tests ran", m[1])
	}
	if actions, _ := strconv.Atoi(m[2]); actions < 300 {
		t.Errorf("only %s actions ran", m[2])
	}
}
