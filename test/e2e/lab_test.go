// Package e2e holds end-to-end tests that run against a real lab cluster.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/testenv"
)

var binDir = flag.String("bin", "../../bin", "directory of cilium-lab, kubectl and the other binaries")

// Lab is a lab cluster started for one test.
type Lab struct {
	t          *testing.T
	Name       string
	StateDir   string
	Kubeconfig string
}

// StartLab brings a lab up with args added to `cilium-lab up` and takes it down, checking
// that nothing is left, when the test ends.
func StartLab(t *testing.T, name string, args ...string) *Lab {
	t.Helper()
	testenv.Privileged(t) // a lab is namespaces, mounts and processes of a cluster
	bin, err := filepath.Abs(*binDir)
	if err != nil {
		t.Fatal(err)
	}
	*binDir = bin
	if _, err := os.Stat(filepath.Join(bin, "cilium-lab")); err != nil {
		t.Fatalf("%s/cilium-lab is missing: run `make build` (or `make test`, which builds it)", bin)
	}
	reclaimAbandoned(t, name)
	l := &Lab{t: t, Name: name, StateDir: filepath.Join(t.TempDir(), "lab")}
	l.Kubeconfig = filepath.Join(l.StateDir, "kubeconfig")
	up := append([]string{"up", "--name", name, "--state-dir", l.StateDir, "--api-port", fmt.Sprint(freePort(t)),
		"--ui-port", fmt.Sprint(freePort(t))}, args...)
	t.Cleanup(func() { l.down() })
	start := time.Now()
	out, err := l.run("cilium-lab", up...)
	t.Logf("cilium-lab up (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("cilium-lab up: %v", err)
	}
	return l
}

// reclaimAbandoned takes down a lab of this name left by a test run that was killed
// (a test removes its lab even when it fails, but not when SIGKILL ends it): its node
// namespaces are still mounted under its state directory, and no process runs with
// that directory. A lab some process still serves is left alone, and up then refuses.
func reclaimAbandoned(t *testing.T, name string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	dirs := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && filepath.Base(filepath.Dir(f[4])) == "ns" && strings.HasPrefix(filepath.Base(f[4]), name+"-") {
			dirs[filepath.Dir(filepath.Dir(f[4]))] = true
		}
	}
	for dir := range dirs {
		if len(processesNaming(dir)) > 0 {
			continue
		}
		out, err := exec.Command(filepath.Join(*binDir, "cilium-lab"), "down", "--state-dir", dir).CombinedOutput()
		t.Logf("an abandoned lab %s was in %s; cilium-lab down: %s", name, dir, out)
		if err != nil {
			t.Fatalf("taking down the abandoned lab in %s: %v", dir, err)
		}
	}
}

// processesNaming lists the running processes with stateDir on their command line.
func processesNaming(stateDir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(stateDir)) {
			out = append(out, fmt.Sprintf("process %s: %s", filepath.Base(filepath.Dir(p)), bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return out
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (l *Lab) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(*binDir, name), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+l.Kubeconfig)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// Kubectl runs kubectl against the lab and fails the test if it fails.
func (l *Lab) Kubectl(args ...string) string {
	l.t.Helper()
	out, err := l.run("kubectl", args...)
	if err != nil {
		l.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// KubectlJSON runs kubectl with -o json and decodes the result into v.
func (l *Lab) KubectlJSON(v any, args ...string) {
	l.t.Helper()
	out := l.Kubectl(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		l.t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
}

// Eventually polls fn until it returns nil or the timeout passes.
func (l *Lab) Eventually(what string, timeout time.Duration, fn func() error) {
	l.t.Helper()
	testenv.Eventually(l.t, timeout, func() error {
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// down removes the lab, runs down a second time (it must be a no-op) and checks that
// nothing of the lab remains on the machine.
func (l *Lab) down() {
	t := l.t
	// The namespaces by identity: after down no process may be in them and no mount may
	// pin them. A node's bpffs (and every pin in it) lives exactly as long as its mount
	// namespace, so this also proves no pin survives.
	inodes := namespaceInodes(l.Name, l.StateDir)
	if len(inodes) < 5 { // underlay, control plane, and net+mnt+uts of a node at least
		t.Errorf("found only %d namespace files of the lab before down: %v", len(inodes), inodes)
	}
	for i := range 2 {
		start := time.Now()
		out, err := l.run("cilium-lab", "down", "--state-dir", l.StateDir)
		t.Logf("cilium-lab down #%d (%s): %s", i+1, time.Since(start).Round(time.Millisecond), out)
		if err != nil {
			t.Errorf("cilium-lab down #%d: %v", i+1, err)
		}
	}
	for _, left := range Leftovers(l.Name, l.StateDir) {
		t.Errorf("left behind after down: %s", left)
	}
	for _, left := range namespaceUsers(inodes) {
		t.Errorf("a namespace of the lab survives down: %s", left)
	}
}

// namespaceInodes returns the inode numbers of the lab's namespace files.
func namespaceInodes(name, stateDir string) map[uint64]string {
	files, _ := filepath.Glob("/run/netns/" + name + "-*")
	more, _ := filepath.Glob(filepath.Join(stateDir, "ns", "*"))
	out := map[uint64]string{}
	for _, f := range append(files, more...) {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err == nil {
			out[st.Ino] = f
		}
	}
	return out
}

// namespaceUsers lists the processes inside, and the mounts pinning, the namespaces.
func namespaceUsers(inodes map[uint64]string) []string {
	var out []string
	nsLinks, _ := filepath.Glob("/proc/[0-9]*/ns/*")
	for _, l := range nsLinks {
		var st syscall.Stat_t
		if syscall.Stat(l, &st) == nil && inodes[st.Ino] != "" {
			out = append(out, fmt.Sprintf("%s is in %s", l, inodes[st.Ino]))
		}
	}
	infos, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, f := range infos {
		b, _ := os.ReadFile(f)
		for ino, name := range inodes {
			if bytes.Contains(b, fmt.Appendf(nil, ":[%d]", ino)) {
				out = append(out, fmt.Sprintf("%s pins %s", f, name))
			}
		}
	}
	return out
}

// Leftovers lists what a lab named name with state in stateDir left on the machine:
// namespace files, mounts, processes, its cgroup and its state directory.
func Leftovers(name, stateDir string) []string {
	var out []string
	if m, _ := filepath.Glob("/run/netns/" + name + "-*"); len(m) > 0 {
		out = append(out, fmt.Sprintf("network namespaces %v", m))
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, stateDir) || strings.Contains(line, "/run/netns/"+name+"-") ||
				(strings.Contains(line, " - bpf ") && strings.Contains(line, stateDir)) {
				out = append(out, "mount: "+line)
			}
		}
	}
	out = append(out, processesNaming(stateDir)...)
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(root, "cilium-lab-"+name)); err == nil {
			out = append(out, "cgroup "+filepath.Join(root, "cilium-lab-"+name))
		}
	}
	if _, err := os.Stat(stateDir); err == nil {
		out = append(out, "state directory "+stateDir)
	}
	return out
}

// Minimal views of the API objects the tests read.
type (
	objectMeta struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	}
	podList struct {
		Items []struct {
			Metadata objectMeta `json:"metadata"`
			Spec     struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
			Status struct {
				Phase      string `json:"phase"`
				PodIP      string `json:"podIP"`
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	nodeList struct {
		Items []struct {
			Metadata objectMeta `json:"metadata"`
			Spec     struct {
				PodCIDR string `json:"podCIDR"`
			} `json:"spec"`
			Status struct {
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
				NodeInfo struct {
					KubeletVersion string `json:"kubeletVersion"`
				} `json:"nodeInfo"`
			} `json:"status"`
		} `json:"items"`
	}
)

func inPrefix(cidr, ip string) bool {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(ip)
	return err == nil && p.Contains(a)
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
