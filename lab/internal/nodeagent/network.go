package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	corev1 "k8s.io/api/core/v1"
)

// ErrNoNetworkConfig means the node's CNI config directory holds no network yet; the
// node is not ready until it does (as with a kubelet whose network plugin is not ready).
var ErrNoNetworkConfig = errors.New("no CNI network configuration")

// cniNetwork attaches pods through libcni exactly as a container runtime does: the
// first configuration file of the directory, in lexical order, names the network.
type cniNetwork struct {
	confDir string
	cni     *libcni.CNIConfig
}

// The pod controller's workers attach pods at once: libcni makes a missing
// exec on first use, unlocked, so the network gets one.
func newCNINetwork(confDir, binDir, cacheDir string) *cniNetwork {
	plugins := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	return &cniNetwork{
		confDir: confDir,
		cni:     libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, plugins),
	}
}

// config loads the first network configuration in the directory.
func (n *cniNetwork) config() (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(n.confDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	for _, f := range files {
		if strings.HasSuffix(f, ".conflist") {
			list, err := libcni.ConfListFromFile(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			return list, nil
		}
		conf, err := libcni.ConfFromFile(f) //nolint:staticcheck // a single-plugin .conf is still a node config; libcni v1.3 reads it only through these
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		list, err := libcni.ConfListFromConf(conf) //nolint:staticcheck // as above
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		return list, nil //nolint:staticcheck // SA4004: the first file in order is the network, as a runtime picks it
	}
	return nil, fmt.Errorf("%s: %w", n.confDir, ErrNoNetworkConfig)
}

// Ready reports whether a network is configured.
func (n *cniNetwork) Ready() error {
	_, err := n.config()
	return err
}

func runtimeConf(pod *corev1.Pod, containerID, netnsPath string) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: containerID,
		NetNS:       netnsPath,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID},
			{"K8S_POD_UID", string(pod.UID)},
		},
	}
	var mappings []map[string]any
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			mappings = append(mappings, map[string]any{
				"hostPort": p.HostPort, "containerPort": p.ContainerPort, "protocol": proto, "hostIP": p.HostIP,
			})
		}
	}
	if len(mappings) > 0 {
		rt.CapabilityArgs = map[string]any{"portMappings": mappings}
	}
	return rt
}

// Add implements podruntime.Network.
func (n *cniNetwork) Add(ctx context.Context, pod *corev1.Pod, containerID, netnsPath string) ([]netip.Addr, error) {
	list, err := n.config()
	if err != nil {
		return nil, err
	}
	res, err := n.cni.AddNetworkList(ctx, list, runtimeConf(pod, containerID, netnsPath))
	if err != nil {
		return nil, fmt.Errorf("CNI ADD %s: %w", list.Name, err)
	}
	return resultIPs(res)
}

// Del implements podruntime.Network. Deleting what is already gone is not an error.
func (n *cniNetwork) Del(ctx context.Context, pod *corev1.Pod, containerID, netnsPath string) error {
	list, err := n.config()
	if errors.Is(err, ErrNoNetworkConfig) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, statErr := os.Stat(netnsPath); statErr != nil {
		netnsPath = "" // CNI DEL must still release the address when the namespace is gone
	}
	if err := n.cni.DelNetworkList(ctx, list, runtimeConf(pod, containerID, netnsPath)); err != nil {
		return fmt.Errorf("CNI DEL %s: %w", list.Name, err)
	}
	return nil
}

func resultIPs(res types.Result) ([]netip.Addr, error) {
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, ip := range r.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	if len(out) == 0 {
		return nil, errors.New("CNI result holds no IP address")
	}
	return out, nil
}

// bridgeConfig is the reference-plugin network of a node whose pods live in podCIDR;
// the lab routes each node's pod CIDR to it over the underlay.
func bridgeConfig(podCIDR string) ([]byte, error) {
	if _, err := netip.ParsePrefix(podCIDR); err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", podCIDR, err)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "lab-bridge",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// writeBridgeConfig installs the bridge network unless the node already has one.
func writeBridgeConfig(confDir, podCIDR string) error {
	b, err := bridgeConfig(podCIDR)
	if err != nil {
		return err
	}
	path := filepath.Join(confDir, "10-lab-bridge.conflist")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
