package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cilium-go/cilium/lab/internal/controlplane"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/proc"
)

func kubeProxyConfigPath(n plan.Node) string { return filepath.Join(n.Dir, "kube-proxy.yaml") }

// nodeProcesses are the daemons of one node: its agent and, if chosen, kube-proxy,
// both in the node's cgroup, as are the pods the agent starts.
func nodeProcesses(p plan.Plan, n plan.Node, cp controlplane.Config, binDir string) []proc.Spec {
	f := controlplane.NodePaths(cp, n.Name)
	specs := []proc.Spec{{
		Name: "node-agent/" + n.Name,
		Path: filepath.Join(binDir, "cilium-lab"),
		Args: []string{"node-agent",
			"--node=" + n.Name,
			"--node-ip=" + n.IP.String(),
			"--kubeconfig=" + f.Kubeconfig,
			"--serving-cert=" + f.ServingCert,
			"--serving-key=" + f.ServingKey,
			"--client-ca=" + f.CACert,
			"--api-client-user=" + controlplane.KubeletClientUser,
			"--bin-dir=" + binDir,
			"--cluster-dns=" + p.ClusterDNS.String(),
			"--cluster-domain=" + p.ClusterDomain,
			fmt.Sprintf("--bridge-cni=%t", p.CNI == plan.CNIBridge),
			"--zone=" + n.Zone,
		},
		Namespaces: nodeNamespaces(n),
		LogFile:    filepath.Join(n.Dir, "node-agent.log"),
		Cgroup:     n.Cgroup,
	}}
	if p.KubeProxy != "none" {
		specs = append(specs, proc.Spec{
			Name:       "kube-proxy/" + n.Name,
			Path:       filepath.Join(binDir, "kube-proxy"),
			Args:       []string{"--config=" + kubeProxyConfigPath(n)},
			Namespaces: nodeNamespaces(n),
			LogFile:    filepath.Join(n.Dir, "kube-proxy.log"),
			Cgroup:     n.Cgroup,
		})
	}
	return specs
}

// kubeProxyConfig is the node's KubeProxyConfiguration. Conntrack sizing is left alone:
// those sysctls belong to the whole machine, not to the node's namespace.
func kubeProxyConfig(p plan.Plan, n plan.Node, kubeconfig string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: %q
clusterCIDR: %q
hostnameOverride: %q
bindAddress: 0.0.0.0
healthzBindAddress: "%s:10256"
metricsBindAddress: "%s:10249"
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, p.KubeProxy, p.ClusterCIDR.String(), n.Name, n.IP, n.IP)
}

func writeNodeConfigs(p plan.Plan, cp controlplane.Config) error {
	if p.KubeProxy == "none" {
		return nil
	}
	for _, n := range p.Nodes {
		b := kubeProxyConfig(p, n, controlplane.NodePaths(cp, n.Name).KubeProxyKubeconfig)
		if err := os.WriteFile(kubeProxyConfigPath(n), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// routeNodes plays the cloud's route table: every machine of the underlay routes each
// node's pod CIDR to that node. With the bridge CNI this carries pod-to-pod traffic
// between nodes; cilium-go routes between nodes itself, and the control plane needs
// the routes in every mode to reach pods.
func routeNodes(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, p plan.Plan, log *slog.Logger) {
	machines := []string{p.ControlPlaneNS}
	if p.CNI == plan.CNIBridge {
		for _, n := range p.Nodes {
			machines = append(machines, n.Netns)
		}
	}
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			want := podRoutes(nodes.Items)
			if p.CNI == plan.CNICilium {
				err = ciliumNodeRoutes(ctx, dyn, nodeIPs(nodes.Items), want)
			}
			if err != nil {
				log.Warn("pod CIDR routes", "error", err)
			}
			for _, ns := range machines {
				if err := syncRoutes(ns, p, want); err != nil {
					log.Warn("pod CIDR routes", "netns", ns, "error", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// podRoutes maps each node's pod CIDRs (spec.podCIDRs, or spec.podCIDR) to its
// InternalIP.
func podRoutes(nodes []corev1.Node) map[netip.Prefix]netip.Addr {
	out := map[netip.Prefix]netip.Addr{}
	ips := nodeIPs(nodes)
	for _, n := range nodes {
		ip, ok := ips[n.Name]
		if !ok {
			continue
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			if cidr, err := netip.ParsePrefix(c); err == nil && cidr.Addr().Is4() {
				out[cidr.Masked()] = ip
			}
		}
	}
	return out
}

// nodeIPs maps node names to their IPv4 InternalIP.
func nodeIPs(nodes []corev1.Node) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is4() {
				out[n.Name] = ip
			}
		}
	}
	return out
}

var ciliumNodes = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumnodes"}

// ciliumNodeRoutes adds the pod CIDRs cilium-go's operator wrote into the
// CiliumNodes (spec.ipam.podCIDRs), each via the node's InternalIP: the
// CiliumNode's own (spec.addresses), else its Node's, of the same name.
func ciliumNodeRoutes(ctx context.Context, dyn dynamic.Interface, nodeIPs map[string]netip.Addr, out map[netip.Prefix]netip.Addr) error {
	list, err := dyn.Resource(ciliumNodes).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, cn := range list.Items {
		maps.Copy(out, ciliumNodePodRoutes(cn.Object, nodeIPs[cn.GetName()]))
	}
	return nil
}

// ciliumNodePodRoutes reads one CiliumNode; nodeIP (may be invalid) stands in for
// an address the CiliumNode does not list.
func ciliumNodePodRoutes(obj map[string]any, nodeIP netip.Addr) map[netip.Prefix]netip.Addr {
	out := map[netip.Prefix]netip.Addr{}
	cidrs, _, _ := unstructured.NestedStringSlice(obj, "spec", "ipam", "podCIDRs")
	addrs, _, _ := unstructured.NestedSlice(obj, "spec", "addresses")
	ip := nodeIP
	for _, a := range addrs {
		m, _ := a.(map[string]any)
		if m["type"] != "InternalIP" {
			continue
		}
		s, _ := m["ip"].(string)
		if addr, err := netip.ParseAddr(s); err == nil && addr.Is4() {
			ip = addr
		}
	}
	if !ip.IsValid() {
		return out
	}
	for _, c := range cidrs {
		if pfx, err := netip.ParsePrefix(c); err == nil && pfx.Addr().Is4() {
			out[pfx.Masked()] = ip
		}
	}
	return out
}

// syncRoutes makes the routes into the cluster CIDR in nsPath match want, skipping a
// node's own pod CIDR (its bridge carries that).
func syncRoutes(nsPath string, p plan.Plan, want map[netip.Prefix]netip.Addr) error {
	ns, err := vns.GetFromPath(nsPath)
	if err != nil {
		return err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	local := map[netip.Addr]bool{}
	if addrs, err := h.AddrList(nil, netlink.FAMILY_V4); err == nil {
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				local[ip.Unmap()] = true
			}
		}
	}
	have := map[netip.Prefix]netlink.Route{}
	for _, r := range routes {
		if r.Dst == nil || r.Gw == nil {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		dst, _ := netip.AddrFromSlice(r.Dst.IP)
		pfx := netip.PrefixFrom(dst.Unmap(), ones)
		// Only routes into the cluster CIDR are ours: the default route (0.0.0.0/0,
		// which overlaps everything) is not.
		if inside(p.ClusterCIDR, pfx) {
			have[pfx] = r
		}
	}
	for pfx, gw := range want {
		if local[gw] {
			continue
		}
		if r, ok := have[pfx]; ok {
			delete(have, pfx)
			if g, _ := netip.AddrFromSlice(r.Gw); g.Unmap() == gw {
				continue
			}
		}
		r := netlink.Route{
			Dst: &net.IPNet{IP: pfx.Addr().AsSlice(), Mask: net.CIDRMask(pfx.Bits(), 32)},
			Gw:  gw.AsSlice(),
		}
		if err := h.RouteReplace(&r); err != nil {
			return fmt.Errorf("route %s via %s: %w", pfx, gw, err)
		}
	}
	for _, r := range have {
		if err := h.RouteDel(&r); err != nil {
			return err
		}
	}
	return nil
}

// inside says whether the prefix inner lies within outer.
func inside(outer, inner netip.Prefix) bool {
	return inner.Bits() >= outer.Bits() && outer.Contains(inner.Addr())
}
