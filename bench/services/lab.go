package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cilium-go/cilium/bench/internal/benchlab"
	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/netnamespace"
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
	backendPods = 3
)

// A labBed is one running lab with the measured Service in it.
type labBed struct {
	*benchlab.Lab
	mode     labMode
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
	maps []benchlab.Maps
}

// startLab brings a lab up for mode and puts the measured Service and its
// pods into it; onClose takes the lab down.
func startLab(ctx context.Context, log *slog.Logger, bin string, mode labMode, onClose func(func() error)) (*labBed, error) {
	log.Info("starting a lab", "proxy", mode.name)
	lab, err := benchlab.Up(bin, mode.labName, onClose, "--routing-mode", "native", "--kube-proxy", mode.kubeProxy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mode.name, err)
	}
	l := &labBed{Lab: lab, mode: mode}
	return l, l.deploy(ctx, onClose)
}

// deploy makes the client and backend pods, starts the backends' servers
// and the measured Service, and waits until the client reaches it.
func (l *labBed) deploy(ctx context.Context, onClose func(func() error)) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}
	if _, err := l.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	nodes := l.Plan.Nodes
	pods := []*corev1.Pod{benchlab.Pod("client", nodes[0].Name, nil), benchlab.Pod("direct", nodes[0].Name, nil)}
	for i := range backendPods {
		pods = append(pods, benchlab.Pod(fmt.Sprintf("backend-%d", i), nodes[1].Name, map[string]string{"app": "backend"}))
	}
	for _, p := range pods {
		if _, err := l.Clientset.CoreV1().Pods(benchNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	ips, err := l.WaitPods(ctx, benchNS, len(pods))
	if err != nil {
		return err
	}
	l.client = ips["client"]
	if l.clientNS, err = benchlab.PodNetns(nodes[0], l.client); err != nil {
		return err
	}
	if l.directNS, err = benchlab.PodNetns(nodes[0], ips["direct"]); err != nil {
		return err
	}
	// Connect/request/close leaves a port in TIME_WAIT per connection: the
	// clients get every port and reuse those a second in TIME_WAIT, which
	// keeps connect's search for a free port, the same on every path, out
	// of the latencies (it cost 15 % of the baseline's p50).
	for _, ns := range []string{l.clientNS, l.directNS} {
		err := netnamespace.Do(ns, func() error {
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
		ns, err := benchlab.PodNetns(nodes[1], ip)
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
	created, err := l.Clientset.CoreV1().Services(benchNS).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if l.cip, err = netip.ParseAddr(created.Spec.ClusterIP); err != nil {
		return fmt.Errorf("the measured Service's ClusterIP: %w", err)
	}
	all, err := l.Clientset.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	l.services = len(all.Items)
	if l.mode.kubeProxy == "none" {
		for _, n := range nodes {
			m, err := benchlab.AgentMaps(n)
			if err != nil {
				return fmt.Errorf("%s: %w", l.mode.name, err)
			}
			onClose(m.Close)
			l.maps = append(l.maps, m)
		}
	}
	return l.waitReachable(ctx, l.cip, 2*time.Minute)
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
		err := netnamespace.Do(l.directNS, func() error {
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
