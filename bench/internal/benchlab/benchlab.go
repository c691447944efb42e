// Package benchlab runs the benchmarks' lab clusters: `cilium-lab up` in a
// temporary state directory, a client-go clientset from its kubeconfig, and
// the ways into its nodes and pods (the nodes' processes by cgroup, a pod's
// network namespace by its address, an agent's pinned maps).
package benchlab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
	"github.com/cilium-go/cilium/pkg/paths"
)

// PodImage is the image of the benchmarks' pods (the lab runs it as agnhost
// pause).
const PodImage = "registry.k8s.io/pause:3.10"

// Plan is what the benchmarks read of the lab's plan.json.
type Plan struct {
	Cgroup string `json:"cgroup"` // every process of the lab lives below
	Nodes  []Node `json:"nodes"`
}

// Node is one node of the lab.
type Node struct {
	Name   string     `json:"name"`
	IP     netip.Addr `json:"ip"`
	Netns  string     `json:"netns"`
	MntNS  string     `json:"mntns"`
	Cgroup string     `json:"cgroup"`
}

// Lab is a running lab cluster.
type Lab struct {
	bin, dir  string
	Plan      Plan
	Config    *rest.Config
	Clientset kubernetes.Interface
}

// Up brings a lab named name up with args added to `cilium-lab up`, with
// the binaries in bin. onClose takes it down (and is called even when Up
// fails: down takes whatever a failed up left).
func Up(bin, name string, onClose func(func() error), args ...string) (*Lab, error) {
	dir, err := os.MkdirTemp("", "cilium-go-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	onClose(func() error { return os.RemoveAll(dir) })
	l := &Lab{bin: bin, dir: dir}
	onClose(func() error {
		if out, err := l.cmd("down"); err != nil {
			return fmt.Errorf("cilium-lab down (%s): %w\n%s", name, err, out)
		}
		return nil
	})
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	up := append([]string{"up", "--name", name, "--api-port", strconv.Itoa(port)}, args...)
	if out, err := l.cmd(up...); err != nil {
		return nil, fmt.Errorf("cilium-lab up (%s): %w\n%s", name, err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &l.Plan); err != nil {
		return nil, fmt.Errorf("the lab's plan: %w", err)
	}
	if len(l.Plan.Nodes) < 2 {
		return nil, fmt.Errorf("the lab has %d nodes, want 2", len(l.Plan.Nodes))
	}
	if l.Config, err = clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig")); err != nil {
		return nil, err
	}
	l.Config.QPS, l.Config.Burst = 2000, 2000 // the benchmarks' creates are their own load
	if l.Clientset, err = kubernetes.NewForConfig(l.Config); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Lab) cmd(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(l.bin, "cilium-lab"), append([]string{"--state-dir", l.dir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// FreePort returns a TCP port free on the host's loopback.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Pod is a pause pod on node with labels.
func Pod(name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "pause", Image: PodImage}}},
	}
}

// WaitPods waits until n pods of namespace run with addresses, and returns
// them by name.
func (l *Lab) WaitPods(ctx context.Context, namespace string, n int) (map[string]netip.Addr, error) {
	const within = 3 * time.Minute
	deadline := time.Now().Add(within)
	for {
		list, err := l.Clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		ips := map[string]netip.Addr{}
		for _, p := range list.Items {
			if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil && p.Status.Phase == corev1.PodRunning {
				ips[p.Name] = ip
			}
		}
		if len(ips) == n {
			return ips, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d pods of %s running after %v", len(ips), n, namespace, within)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// NodeProcs lists the processes of the node's cgroup subtree by command
// name.
func NodeProcs(n Node) (map[string][]int, error) {
	out := map[string][]int{}
	err := filepath.WalkDir(n.Cgroup, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // the cgroup went away
		}
		for f := range strings.FieldsSeq(string(b)) {
			comm, err := os.ReadFile("/proc/" + f + "/comm")
			if pid, perr := strconv.Atoi(f); err == nil && perr == nil {
				name := strings.TrimSpace(string(comm))
				out[name] = append(out[name], pid)
			}
		}
		return nil
	})
	return out, err
}

// PodNetns finds the network namespace holding addr among those of the
// node's processes, waiting a while for the pod's process to start. Labs
// running at once give their pods the same addresses: only the node's own
// processes count.
func PodNetns(n Node, addr netip.Addr) (string, error) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		procs, err := NodeProcs(n)
		if err != nil {
			return "", err
		}
		seen := map[string]bool{}
		for _, pids := range procs {
			for _, pid := range pids {
				ns := fmt.Sprintf("/proc/%d/ns/net", pid)
				id, err := os.Readlink(ns)
				if err != nil || seen[id] {
					continue
				}
				seen[id] = true
				if has, err := HasAddr(ns, addr); err == nil && has {
					return ns, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no process on %s is in a network namespace holding %s after 30s", n.Name, addr)
}

// HasAddr reports whether an interface of the network namespace ns has addr.
func HasAddr(ns string, addr netip.Addr) (bool, error) {
	var found bool
	err := netnamespace.Do(ns, func() error {
		addrs, err := net.InterfaceAddrs()
		for _, a := range addrs {
			if p, ok := a.(*net.IPNet); ok && p.IP.Equal(addr.AsSlice()) {
				found = true
			}
		}
		return err
	})
	return found, err
}

// Maps is what the benchmarks read of a node datapath's maps, to see that
// the agent programmed what they changed: an agent's (AgentMaps) or a
// test node's.
type Maps interface {
	PolicyHas(epID uint16, dir spec.Direction, remote identity.NumericIdentity, proto uint8, port uint16) bool
	Services() ([]spec.Service, error)
	Backends() (map[spec.BackendID]spec.Backend, error)
	ServiceBackends(f spec.Frontend) ([]spec.Backend, error)
	SockTranslated() (bool, error)
	Close() error
}

// AgentMaps opens a node's pinned maps, in the node's own bpffs, through its
// agent's root.
func AgentMaps(n Node) (Maps, error) {
	procs, err := NodeProcs(n)
	if err != nil {
		return nil, err
	}
	if len(procs["cilium-agent"]) == 0 {
		return nil, fmt.Errorf("no cilium-agent in %s", n.Cgroup)
	}
	root := fmt.Sprintf("/proc/%d/root", procs["cilium-agent"][0])
	return nodedatapath.OpenPinnedMaps(filepath.Join(root, paths.DefaultConfig.BPFRoot, "maps"))
}

// Freeze stops or continues every process of the lab at once (cgroup v2
// freezer), and waits until the kernel says it is done.
func (l *Lab) Freeze(frozen bool) error {
	v := "0"
	if frozen {
		v = "1"
	}
	if err := os.WriteFile(filepath.Join(l.Plan.Cgroup, "cgroup.freeze"), []byte(v), 0o644); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(l.Plan.Cgroup, "cgroup.events"))
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "frozen "+v) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup.freeze %s not done after 10s", v)
		}
	}
}
