package agent

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/pkg/k8s/client"
)

// Config says whether and how the agent talks to Kubernetes.
type Config struct {
	EnableK8s   bool   `mapstructure:"enable-k8s"`
	Kubeconfig  string `mapstructure:"kubeconfig"`
	K8sNodeName string `mapstructure:"k8s-node-name"`
}

// DefaultConfig leaves Kubernetes off: an agent without an API server
// (tests, a lone node) still serves CNI with the init identity.
var DefaultConfig = Config{}

// Flags implements cell.Flagger.
func (c Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("enable-k8s", c.EnableK8s, "watch Kubernetes: identities from pod labels, CiliumEndpoints, ipcache (implied by --kubeconfig)")
	fs.String("kubeconfig", c.Kubeconfig, "kubeconfig of the API server; empty: the in-cluster service account")
	fs.String("k8s-node-name", c.K8sNodeName, "this node's name in Kubernetes (required with Kubernetes)")
}

// Enabled: Kubernetes is on when asked for or when a kubeconfig is given.
func (c Config) Enabled() bool { return c.EnableK8s || c.Kubeconfig != "" }

// Validate names the first bad flag.
func (c Config) Validate() error {
	if c.Enabled() && c.K8sNodeName == "" {
		return errors.New("--k8s-node-name: required when Kubernetes is enabled")
	}
	return nil
}

// Clients reach the API server: Kubernetes' own kinds and Cilium's.
type Clients struct {
	Kube   kubernetes.Interface
	Cilium client.Interface
}

// NewClients connects through c.Kubeconfig, or the in-cluster service
// account without one. It only builds clients; nothing is dialed yet.
func NewClients(c Config) (*Clients, error) {
	var rc *rest.Config
	var err error
	if c.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.UserAgent = "cilium-agent"
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes clientset: %w", err)
	}
	cilium, err := client.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cilium clientset: %w", err)
	}
	return &Clients{Kube: kube, Cilium: cilium}, nil
}
