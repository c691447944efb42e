package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/inns"
)

// The lab part runs what the parts on dptest namespaces cannot: the same
// measurements against kube-proxy, on real clusters. A lab per proxy
// (`cilium-lab up`: a real API server, the lab's kubelet, cilium-go as the
// CNI in native routing) runs at once, so that repetitions interleave the
// proxies as they interleave paths in the other parts:
//   - cilium-go replacing kube-proxy (--kube-proxy=none);
//   - kube-proxy in iptables mode beside cilium-go (kube-proxy-replacement
//     false), the binary of the Kubernetes release the lab runs;
//   - kube-proxy in nftables mode, likewise.
//
// In each, the client pods run on node 1 and the measured Service's three
// backend pods on node 2; the backends' servers are this process's, in
// the pods' namespaces. Scales are Service objects in the cluster: fillers
// are selectorless Services with EndpointSlices of 2 to 4 endpoints.

// A labMode is one proxy under test.
type labMode struct {
	key       string // -lab-modes
	name      string // in the report
	kubeProxy string // cilium-lab up --kube-proxy
	labName   string // cilium-lab up --name
}

var labModes = []labMode{
	{"cilium-go", "cilium-go (no kube-proxy)", "none", "bsvccg"},
	{"iptables", "kube-proxy iptables", "iptables", "bsvcipt"},
	{"nftables", "kube-proxy nftables", "nftables", "bsvcnft"},
}

const (
	benchNS     = "bench"
	fillerPort  = 80
	managedBy   = "bench.cilium-go.io"
	podImage    = "registry.k8s.io/pause:3.10" // the lab runs it as agnhost pause
	backendPods = 3
)

// labPlan is what the bench reads of the lab's plan.json.
type labPlan struct {
	Cgroup string    `json:"cgroup"` // every process of the lab lives below
	Nodes  []labNode `json:"nodes"`
}

type labNode struct {
	Name   string     `json:"name"`
	IP     netip.Addr `json:"ip"`
	Netns  string     `json:"netns"`
	MntNS  string     `json:"mntns"`
	Cgroup string     `json:"cgroup"`
}

// A labBed is one running lab with the measured Service in it.
type labBed struct {
	mode     labMode
	bin, dir string
	plan     labPlan
	cs       kubernetes.Interface
	client   netip.Addr
	clientNS string // the client pod's network namespace
	// directNS is a second client pod's, on the same node, for the pod-IP
	// baseline. Its own addresses keep the baseline's connections out of
	// the ClusterIP's conntrack tuples: through kube-proxy, a ClusterIP
	// connection whose source port last went straight to the same backend
	// clashes with that connection's entry lingering in TIME_WAIT, and
	// kube-proxy's iptables rules drop what conntrack then calls invalid.
	directNS string
	backends []netip.Addr
	cip      netip.Addr // the measured Service's ClusterIP
	services int        // Service objects in the cluster
	fillers  []*filler  // in creation order
	// maps are cilium-go's nodes' pinned maps, in node order; nil with
	// kube-proxy.
	maps []*datapath.Maps
}

// startLab brings a lab up for mode and puts the measured Service and its
// pods into it; onClose takes the lab down.
func startLab(ctx context.Context, log *slog.Logger, bin string, mode labMode, onClose func(func() error)) (*labBed, error) {
	dir, err := os.MkdirTemp("", "cilium-go-bench-services-"+mode.labName+"-")
	if err != nil {
		return nil, err
	}
	onClose(func() error { return os.RemoveAll(dir) })
	l := &labBed{mode: mode, bin: bin, dir: dir}
	// Down is safe after a failed up and takes whatever it left.
	onClose(func() error {
		if out, err := l.labCmd("down"); err != nil {
			return fmt.Errorf("cilium-lab down (%s): %w\n%s", mode.name, err, out)
		}
		return nil
	})
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	log.Info("starting a lab", "proxy", mode.name)
	out, err := l.labCmd("up", "--name", mode.labName, "--api-port", strconv.Itoa(port),
		"--routing-mode", "native", "--kube-proxy", mode.kubeProxy)
	if err != nil {
		return nil, fmt.Errorf("cilium-lab up (%s): %w\n%s", mode.name, err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &l.plan); err != nil {
		return nil, fmt.Errorf("the lab's plan: %w", err)
	}
	if len(l.plan.Nodes) < 2 {
		return nil, fmt.Errorf("the lab has %d nodes, want 2", len(l.plan.Nodes))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 2000, 2000 // the fillers' creates are the bench's own load
	if l.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return l, l.deploy(ctx, onClose)
}

func (l *labBed) labCmd(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(l.bin, "cilium-lab"), append([]string{"--state-dir", l.dir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// deploy makes the client and backend pods, starts the backends' servers
// and the measured Service, and waits until the client reaches it.
func (l *labBed) deploy(ctx context.Context, onClose func(func() error)) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}
	if _, err := l.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	pod := func(name, node string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64),
				Containers: []corev1.Container{{Name: "pause", Image: podImage}}},
		}
	}
	pods := []*corev1.Pod{pod("client", l.plan.Nodes[0].Name, nil), pod("direct", l.plan.Nodes[0].Name, nil)}
	for i := range backendPods {
		pods = append(pods, pod(fmt.Sprintf("backend-%d", i), l.plan.Nodes[1].Name, map[string]string{"app": "backend"}))
	}
	for _, p := range pods {
		if _, err := l.cs.CoreV1().Pods(benchNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	ips, err := l.waitPods(ctx, len(pods))
	if err != nil {
		return err
	}
	l.client = ips["client"]
	if l.clientNS, err = podNetns(l.plan.Nodes[0], l.client); err != nil {
		return err
	}
	if l.directNS, err = podNetns(l.plan.Nodes[0], ips["direct"]); err != nil {
		return err
	}
	// Connect/request/close leaves a port in TIME_WAIT per connection: the
	// clients get every port and reuse those a second in TIME_WAIT, which
	// keeps connect's search for a free port, the same on every path, out
	// of the latencies (it cost 15 % of the baseline's p50).
	for _, ns := range []string{l.clientNS, l.directNS} {
		err := inns.Do(ns, func() error {
			if err := os.WriteFile("/proc/sys/net/ipv4/tcp_tw_reuse", []byte("1"), 0o644); err != nil {
				return err
			}
			return os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte("1024 65535"), 0o644)
		})
		if err != nil {
			return err
		}
	}
	for i := range backendPods {
		ip := ips[fmt.Sprintf("backend-%d", i)]
		ns, err := podNetns(l.plan.Nodes[1], ip)
		if err != nil {
			return err
		}
		s, err := traffic.StartServers(ns, ip, streamPort, echoPort)
		if err != nil {
			return err
		}
		onClose(s.Close)
		l.backends = append(l.backends, ip)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "measured"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "backend"}, Ports: []corev1.ServicePort{
			{Name: "echo", Port: 80, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP},
			{Name: "sink", Port: streamPort, TargetPort: intstr.FromInt32(streamPort), Protocol: corev1.ProtocolTCP},
		}},
	}
	created, err := l.cs.CoreV1().Services(benchNS).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if l.cip, err = netip.ParseAddr(created.Spec.ClusterIP); err != nil {
		return fmt.Errorf("the measured Service's ClusterIP: %w", err)
	}
	all, err := l.cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	l.services = len(all.Items)
	if l.mode.kubeProxy == "none" {
		for _, n := range l.plan.Nodes {
			m, err := l.agentMaps(n)
			if err != nil {
				return err
			}
			onClose(m.Close)
			l.maps = append(l.maps, m)
		}
	}
	return l.waitReachable(ctx, l.cip, 2*time.Minute)
}

// waitPods waits until n pods of the bench namespace run with addresses,
// and returns them by name.
func (l *labBed) waitPods(ctx context.Context, n int) (map[string]netip.Addr, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		list, err := l.cs.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{})
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
			return nil, fmt.Errorf("%s: %d of %d bench pods running after 3m", l.mode.name, len(ips), n)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitReachable waits until a pod gets an echo through addr:80,
// translated by the proxy under test. The probes come from the direct
// pod, which measures pod addresses only, never from the client: through
// kube-proxy, a SYN that leaves before the rules exist leaves a conntrack
// entry without translation, which every later SYN from its port joins
// (and renews), so a measured connection that drew that port would go to
// the ClusterIP itself and time out, again and again.
func (l *labBed) waitReachable(ctx context.Context, addr netip.Addr, within time.Duration) error {
	to := netip.AddrPortFrom(addr, 80)
	deadline := time.Now().Add(within)
	for {
		err := inns.Do(l.directNS, func() error {
			c, err := net.DialTimeout("tcp4", to.String(), 500*time.Millisecond)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(dptest.ReplyWait))
			if _, err := c.Write([]byte{1}); err != nil {
				return err
			}
			_, err = c.Read(make([]byte, 1))
			return err
		})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the direct pod does not reach %s after %v: %w", l.mode.name, to, within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// podNetns finds the network namespace holding addr among those of the
// node's agnhost processes (the lab runs pause images as agnhost). Labs
// running at once give their pods the same addresses: only the node's
// own processes count.
func podNetns(n labNode, addr netip.Addr) (string, error) {
	procs, err := nodeProcs(n)
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	for _, pid := range procs["agnhost"] {
		ns := fmt.Sprintf("/proc/%d/ns/net", pid)
		id, err := os.Readlink(ns)
		if err != nil || seen[id] {
			continue
		}
		seen[id] = true
		var found bool
		err = inns.Do(ns, func() error {
			addrs, err := net.InterfaceAddrs()
			for _, a := range addrs {
				if p, ok := a.(*net.IPNet); ok && p.IP.Equal(addr.AsSlice()) {
					found = true
				}
			}
			return err
		})
		if err == nil && found {
			return ns, nil
		}
	}
	return "", fmt.Errorf("no pod process on %s holds %s", n.Name, addr)
}

// freeze stops or continues every process of the lab at once (cgroup v2
// freezer), and waits until the kernel says it is done.
func (l *labBed) freeze(frozen bool) error {
	v := "0"
	if frozen {
		v = "1"
	}
	if err := os.WriteFile(filepath.Join(l.plan.Cgroup, "cgroup.freeze"), []byte(v), 0o644); err != nil {
		return fmt.Errorf("%s: %w", l.mode.name, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(l.plan.Cgroup, "cgroup.events"))
		if err != nil {
			return fmt.Errorf("%s: %w", l.mode.name, err)
		}
		if strings.Contains(string(b), "frozen "+v) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: cgroup.freeze %s not done after 10s", l.mode.name, v)
		}
	}
}
