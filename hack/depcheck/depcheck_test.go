// Package depcheck keeps the module's package graph honest: the kernel is
// touched only at the edge, the CNI plugin stays a thin client, and the
// upstream hubble CLI that the e2e tests build stays out of the product.
package depcheck

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

const (
	module   = "github.com/cilium-go/cilium"
	datapath = module + "/internal/datapath"
	// spec holds the datapath's values (endpoints, ipcache entries, ...):
	// what the control plane computes, with no kernel behind it.
	spec = datapath + "/spec"
	// testenv is the privileged tests' infrastructure.
	testenv = module + "/internal/testenv"
)

// kernelFacing may import the kernel libraries: the datapath, the CNI's
// pod link code, the namespace helper they share, and the tests' namespaces.
var kernelFacing = []string{
	datapath,
	module + "/internal/podlink",
	module + "/internal/netnamespace",
	testenv,
	// The benchmark loads its own floor program (bpf/bench).
	module + "/bench/datapath",
}

// kernelLibraries are what only kernelFacing packages import.
var kernelLibraries = []string{"github.com/cilium/ebpf", "github.com/vishvananda/netlink", "github.com/vishvananda/netns", "golang.org/x/sys/unix"}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func under(pkg string, roots ...string) bool {
	for _, r := range roots {
		if pkg == r || strings.HasPrefix(pkg, r+"/") {
			return true
		}
	}
	return false
}

func TestOnlyTheDatapathImportsTheKernel(t *testing.T) {
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if under(pkg, kernelFacing...) && pkg != spec {
			continue
		}
		for _, imp := range imports {
			if under(imp, kernelLibraries...) {
				t.Errorf("%s imports %s: only %v may", pkg, imp, kernelFacing)
			}
		}
	}
}

// TestOnlyTestsImportTestenv: what a test needs (root, throwaway
// namespaces) stays out of the binaries.
func TestOnlyTestsImportTestenv(t *testing.T) {
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if imp == testenv {
				t.Errorf("%s imports %s outside its tests", pkg, testenv)
			}
		}
	}
}

// The CNI plugin, the hubble CLI, the relay and the UI run where no
// datapath is.
func TestClientsLinkNoDatapath(t *testing.T) {
	for _, bin := range []string{"cilium-cni", "hubble", "hubble-relay", "hubble-ui", "cilium-health"} {
		for _, dep := range goList(t, "-deps", module+"/cmd/"+bin) {
			if under(dep, "github.com/cilium/ebpf", datapath) && dep != spec {
				t.Errorf("%s depends on %s", bin, dep)
			}
		}
	}
}

// flowPackages turn the datapath's events into flows and select them:
// pure code, as the policy engine is, which reads events as spec values
// and links no kernel, Kubernetes client, statedb nor hive.
var flowPackages = []string{module + "/pkg/hubble/parser", module + "/pkg/hubble/filters", module + "/pkg/hubble/flows"}

func TestFlowPackagesArePure(t *testing.T) {
	impure := append([]string{"github.com/cilium/ebpf", datapath, "k8s.io/client-go", "github.com/cilium/statedb", "github.com/cilium/hive"},
		kernelLibraries...)
	for _, pkg := range flowPackages {
		for _, dep := range goList(t, "-deps", pkg) {
			if under(dep, impure...) && dep != spec {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// datapathUsers may hold the kernel datapath itself: the agent cell that
// runs it (the node datapath), the monitor that reads its events, the
// debug tool that reads its pinned maps, and the layer-7 proxy, its other
// end (transparent sockets, the pinned ipcache). Everyone else describes desired
// state and reads events with internal/datapath/spec, and reaches the
// kernel through what these packages provide.
var datapathUsers = []string{datapath, module + "/pkg/nodedatapath", module + "/cmd/cilium-dbg", module + "/pkg/monitor",
	module + "/pkg/proxy"}

// harnesses are the datapath's test kit: real nodes and pods in throwaway
// namespaces. The benchmarks measure such nodes, so they may build them,
// and read their maps through pkg/nodedatapath like any other tool.
var harnesses = []string{datapath + "/dptest", datapath + "/testnode"}

func TestControlPlaneHoldsOnlyDatapathValues(t *testing.T) {
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if under(pkg, datapathUsers...) {
			continue
		}
		for _, imp := range imports {
			if under(imp, harnesses...) && under(pkg, module+"/bench") {
				continue
			}
			if under(imp, datapath) && imp != spec {
				t.Errorf("%s imports %s: only %v may; values are in %s", pkg, imp, datapathUsers, spec)
			}
		}
	}
}

func TestDatapathValuesHaveNoKernelNorKubernetes(t *testing.T) {
	for _, dep := range goList(t, "-deps", spec) {
		if under(dep, kernelLibraries...) || under(dep, "k8s.io", "github.com/cilium/ebpf") || (under(dep, datapath) && dep != spec) {
			t.Errorf("%s depends on %s", spec, dep)
		}
	}
}

// policyEngine is the pure policy engine: rules, identities and
// endpoints in, policy map entries out. It must be usable (by tests, by
// cilium-dbg, by Hubble's parser that names its origins) without a
// Kubernetes client, statedb, hive or the kernel; translation from
// Kubernetes is pkg/policy/k8s and the agent's runtime pkg/policy/agent.
const policyEngine = module + "/pkg/policy"

var policyEngineForbidden = []string{"k8s.io/client-go", "github.com/cilium/statedb", "github.com/cilium/hive",
	"github.com/cilium/ebpf"}

func TestPolicyEngineIsPure(t *testing.T) {
	for _, dep := range goList(t, "-deps", policyEngine) {
		if under(dep, policyEngineForbidden...) {
			t.Errorf("%s depends on %s", policyEngine, dep)
		}
	}
}

// ciliumAPI are the only packages of Cilium's module that cilium-go may
// use, all of them API schemas: Hubble's generated gRPC API, so that
// Hubble's clients work against cilium-go, and the generated models of the
// agent's and cilium-health's REST APIs, so that cilium-dbg prints the JSON
// that cilium-cli decodes. Everything else is written here.
var ciliumAPI = []string{"flow", "observer", "peer", "relay", "models", "health/models"}

func TestOnlyAPISchemasFromCilium(t *testing.T) {
	allowed := map[string]bool{}
	for _, p := range ciliumAPI {
		allowed["github.com/cilium/cilium/api/v1/"+p] = true
	}
	for _, dep := range goList(t, "-deps", "-test", module+"/...") {
		if under(dep, "github.com/cilium/cilium") && !allowed[dep] {
			t.Errorf("cilium-go depends on %s: of github.com/cilium/cilium only %v under api/v1 may be used", dep, ciliumAPI)
		}
	}
}

// upstreamCLI is the test-only module that builds Cilium's hubble CLI
// (make build-hubble-upstream) for the e2e tests.
const upstreamCLI = module + "/test/hubblecli"

type goMod struct {
	Require []struct{ Path, Version string }
	Replace []struct{ Old struct{ Path string } }
	Tool    []struct{ Path string }
}

func readGoMod(t *testing.T, path string) goMod {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", path).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", path, err)
	}
	var m goMod
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// TestUpstreamCLIStaysApart: nothing of cilium-go links the upstream CLI's
// module or Cilium's CLI packages, the main go.mod neither requires nor
// replaces it, and the CLI is the release whose API cilium-go speaks.
func TestUpstreamCLIStaysApart(t *testing.T) {
	for _, dep := range goList(t, "-deps", "-test", module+"/...") {
		if under(dep, upstreamCLI, "github.com/cilium/cilium/hubble") {
			t.Errorf("cilium-go depends on %s", dep)
		}
	}
	root := readGoMod(t, "../../go.mod")
	for _, r := range root.Require {
		if under(r.Path, upstreamCLI) {
			t.Errorf("go.mod requires %s", r.Path)
		}
	}
	for _, r := range root.Replace {
		if under(r.Old.Path, upstreamCLI) {
			t.Errorf("go.mod replaces %s", r.Old.Path)
		}
	}
	version := func(m goMod, path string) string {
		for _, r := range m.Require {
			if r.Path == path {
				return r.Version
			}
		}
		return ""
	}
	cli := readGoMod(t, "../../test/hubblecli/go.mod")
	if v, want := version(cli, "github.com/cilium/cilium"), version(root, "github.com/cilium/cilium"); v != want {
		t.Errorf("test/hubblecli builds Cilium %s's hubble, cilium-go speaks %s's API", v, want)
	}
	if len(cli.Tool) != 1 || cli.Tool[0].Path != "github.com/cilium/cilium/hubble" {
		t.Errorf("test/hubblecli's tool is %v, want github.com/cilium/cilium/hubble", cli.Tool)
	}
}

// k8sAllowed are what Kubernetes' packages may import of the module: each
// other, the CRDs' policy schema, and the health of the cells they run
// in. A reflector that knew a domain package would decide for it.
var k8sAllowed = []string{module + "/pkg/k8s", module + "/pkg/policy/api", module + "/pkg/health"}

func TestKubernetesPackagesImportNoDomain(t *testing.T) {
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/pkg/k8s/...") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if under(imp, module) && !under(imp, k8sAllowed...) {
				t.Errorf("%s imports %s: Kubernetes packages import only %v", pkg, imp, k8sAllowed)
			}
		}
	}
}
