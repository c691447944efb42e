// Package nodeagent is the lab's kubelet: it registers a node, keeps its lease and
// status, serves exec and logs to the API server, and runs the pods bound to it through
// the pod runtime, attaching them with CNI. It runs inside the node's namespaces.
package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/lab/internal/images"
	"github.com/cilium-go/cilium/lab/internal/podruntime"
)

// KubeletPort is where node agents serve exec, logs and port-forward.
const KubeletPort = 10250

// Version is the kubelet version the node reports: the lab's Kubernetes release.
const Version = "v1.37.2"

// Config is everything a node agent needs; the supervisor passes it as flags.
type Config struct {
	Node          string
	NodeIP        netip.Addr
	Kubeconfig    string
	ServingCert   string
	ServingKey    string
	ClientCA      string
	APIClientUser string // the only client allowed on the kubelet port (the API server)
	BinDir        string
	ClusterDNS    netip.Addr
	ClusterDomain string
	// BridgeCNI makes the agent write the reference bridge network for its pod CIDR.
	BridgeCNI bool
	// Zone is the node's topology.kubernetes.io/zone label; "" for none.
	Zone string

	CNIConfDir string
	CNIBinDir  string
	CNICache   string
	PodsDir    string
	// NetnsDir is where pods' network namespaces are pinned, as containerd
	// pins them: the agent's pod sees them there (HostToContainer).
	NetnsDir string
}

// Run runs the node until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return err
	}
	network := newCNINetwork(cfg.CNIConfDir, cfg.CNIBinDir, cfg.CNICache)
	spec := nodeSpec(cfg)
	status := newNodeStatus(spec, network, log)

	mux := http.NewServeMux()
	var rt *podruntime.Runtime
	newProvider := func(nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		rt, err = podruntime.New(podruntime.Config{
			NodeName:      cfg.Node,
			NodeIP:        cfg.NodeIP,
			PodsDir:       cfg.PodsDir,
			NetnsDir:      cfg.NetnsDir,
			SandboxBinary: "/proc/self/exe",
			Images:        images.New(cfg.BinDir),
			Network:       network,
			ClusterDNS:    cfg.ClusterDNS,
			ClusterDomain: cfg.ClusterDomain,
			Client:        client,
			Logger:        log,
		})
		return rt, status, err
	}
	n, err := nodeutil.NewNode(cfg.Node, newProvider,
		nodeutil.WithClient(client),
		func(c *nodeutil.NodeConfig) error {
			c.NodeSpec = spec
			c.HTTPListenAddr = net.JoinHostPort(cfg.NodeIP.String(), strconv.Itoa(KubeletPort))
			c.TLSConfig = tlsCfg
			c.Handler = onlyUser(cfg.APIClientUser, mux)
			c.NumWorkers = 4
			// The runtime resolves env itself, status.podIP included, which
			// virtual-kubelet cannot know before the pod has a network.
			c.SkipDownwardAPIResolution = true
			return nil
		},
		nodeutil.AttachProviderRoutes(mux),
		// Like the kubelet, the node keeps the pod conditions it does not own
		// (readiness gates) and counts the gates in the pod's Ready condition.
		nodeutil.WithPodControllerConfigOverrides(func(c *node.PodControllerConfig) error {
			c.PodClient = podruntime.PreserveForeignConditions(c.PodClient)
			return rt.WatchAPIPods(c.PodInformer)
		}),
	)
	if err != nil {
		return err
	}
	go status.run(ctx)
	if cfg.BridgeCNI {
		go func() {
			if err := installBridge(ctx, client, cfg); err != nil && ctx.Err() == nil {
				log.Error("bridge network", "error", err)
			}
		}()
	}
	log.Info("node agent starting", "node", cfg.Node, "ip", cfg.NodeIP)
	return n.Run(vklog.WithLogger(ctx, vkLogger{log}))
}

// installBridge waits for the controller manager to give the node its pod CIDR, then
// writes the bridge network for it.
func installBridge(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, cfg.Node, metav1.GetOptions{})
		if err == nil && n.Spec.PodCIDR != "" {
			return writeBridgeConfig(cfg.CNIConfDir, n.Spec.PodCIDR)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func serverTLS(cfg Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.ServingCert, cfg.ServingKey)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(cfg.ClientCA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no certificate", cfg.ClientCA)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"}, // exec and attach upgrade the connection (SPDY, websockets)
	}, nil
}

// onlyUser lets through requests whose verified client certificate names user: the
// node's exec and logs are for the API server, not for other nodes of the lab.
func onlyUser(user string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || r.TLS.VerifiedChains[0][0].Subject.CommonName != user {
			http.Error(w, "Forbidden: only "+user+" may use the node API", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func nodeSpec(cfg Config) corev1.Node {
	hostname, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	labels := map[string]string{
		"kubernetes.io/hostname": cfg.Node,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     runtime.GOARCH,
		"cilium-lab.io/node":     "true",
	}
	// As a cloud's kubelet labels its node with the zone it runs in; the
	// EndpointSlice controller and the load balancers read it for
	// topology.
	if cfg.Zone != "" {
		labels[corev1.LabelTopologyZone] = cfg.Zone
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   cfg.Node,
			Labels: labels,
		},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodeRunning,
			Capacity:    capacity,
			Allocatable: capacity,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: cfg.NodeIP.String()},
				{Type: corev1.NodeHostName, Address: hostname},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: KubeletPort}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          Version,
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				KernelVersion:           strings.TrimSpace(string(kernel)),
				OSImage:                 "cilium-lab",
				ContainerRuntimeVersion: "cilium-lab://" + Version,
			},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
			},
		},
	}
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// DefaultPaths sets the standard node paths inside a node's mount namespace.
func (c *Config) DefaultPaths() {
	c.CNIConfDir = "/etc/cni/net.d"
	c.CNIBinDir = "/opt/cni/bin"
	c.CNICache = "/var/lib/cni/cache"
	c.PodsDir = "/var/lib/kubelet/pods"
	c.NetnsDir = "/var/run/netns"
}
