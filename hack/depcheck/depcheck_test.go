// Package depcheck keeps the module's package graph honest: the kernel is
// touched only at the edge, and the CNI plugin stays a thin client.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/cilium-go/cilium"

// kernelFacing may import the kernel libraries: the datapath, the CNI's
// pod link code and the namespace helper they share.
var kernelFacing = []string{
	module + "/internal/datapath",
	module + "/internal/podlink",
	module + "/internal/inns",
	// The benchmark loads its own floor program (bpf/bench).
	module + "/bench/datapath",
}

// kernelLibraries are what only kernelFacing packages import.
var kernelLibraries = []string{"github.com/cilium/ebpf", "github.com/vishvananda/netlink", "github.com/vishvananda/netns", "golang.org/x/sys/unix"}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
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
		if under(pkg, kernelFacing...) {
			continue
		}
		for _, imp := range imports {
			if under(imp, kernelLibraries...) {
				t.Errorf("%s imports %s: only %v may", pkg, imp, kernelFacing)
			}
		}
	}
}

func TestCNIPluginLinksNoDatapath(t *testing.T) {
	for _, dep := range goList(t, "-deps", module+"/cmd/cilium-cni") {
		if under(dep, "github.com/cilium/ebpf", module+"/internal/datapath") {
			t.Errorf("cilium-cni depends on %s", dep)
		}
	}
}
