package agent

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
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
	// K8sServiceHost and K8sServicePort reach the API server directly,
	// as Cilium's flags do: without kube-proxy, the kubernetes
	// Service's ClusterIP works only once the agent runs.
	K8sServiceHost string `mapstructure:"k8s-service-host"`
	K8sServicePort int    `mapstructure:"k8s-service-port"`
	// ClusterName is the cluster's name, Cilium's: every pod's identity
	// carries it as io.cilium.k8s.policy.cluster, and Hubble's server
	// certificates name it.
	ClusterName string `mapstructure:"cluster-name"`
}

// DefaultConfig leaves Kubernetes off: an agent without an API server
// (tests, a lone node) still serves CNI with the init identity.
var DefaultConfig = Config{ClusterName: "default"}

// Flags implements cell.Flagger.
func (c Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("enable-k8s", c.EnableK8s, "watch Kubernetes: identities from pod labels, CiliumEndpoints, ipcache (implied by --kubeconfig)")
	fs.String("kubeconfig", c.Kubeconfig, "kubeconfig of the API server; empty: the in-cluster service account")
	fs.String("k8s-node-name", c.K8sNodeName, "this node's name in Kubernetes (required with Kubernetes)")
	fs.String("k8s-service-host", c.K8sServiceHost, "the API server's address, instead of the kubeconfig's or the in-cluster kubernetes Service")
	fs.Int("k8s-service-port", c.K8sServicePort, "the API server's port with --k8s-service-host (default 443)")
	fs.String("cluster-name", c.ClusterName, "the cluster's name: a label of every pod's identity (io.cilium.k8s.policy.cluster) and part of Hubble's certificate names")
}

// Enabled: Kubernetes is on when asked for or when a kubeconfig is given.
func (c Config) Enabled() bool { return c.EnableK8s || c.Kubeconfig != "" }

// Validate names the first bad flag.
func (c Config) Validate() error {
	if c.Enabled() && c.K8sNodeName == "" {
		return errors.New("--k8s-node-name: required when Kubernetes is enabled")
	}
	if c.K8sServicePort < 0 || c.K8sServicePort > 65535 {
		return fmt.Errorf("--k8s-service-port %d: want 1-65535", c.K8sServicePort)
	}
	if c.K8sServicePort != 0 && c.K8sServiceHost == "" {
		return errors.New("--k8s-service-port: needs --k8s-service-host")
	}
	if errs := validation.IsDNS1123Label(c.ClusterName); len(errs) > 0 {
		return fmt.Errorf("--cluster-name %q: %s", c.ClusterName, strings.Join(errs, "; "))
	}
	return nil
}

// serviceAccountDir holds a pod's service account credentials.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Clients reach the API server: Kubernetes' own kinds and Cilium's.
type Clients struct {
	Kube   kubernetes.Interface
	Cilium client.Interface
	// Status is Cilium's kinds again, with a rate limit of its own, for
	// writes that may wait (policy status), so that they never queue
	// before the agent's own (identities, endpoints). Nil: Cilium.
	Status client.Interface
}

// NewClients connects through c.Kubeconfig, or the in-cluster service
// account without one. It only builds clients; nothing is dialed yet.
func NewClients(c Config) (*Clients, error) {
	var rc *rest.Config
	var err error
	switch {
	case c.Kubeconfig != "":
		rc, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	case c.K8sServiceHost != "":
		// The service account's credentials, as in-cluster, but
		// not the kubernetes Service's address.
		rc = &rest.Config{BearerTokenFile: serviceAccountDir + "/token",
			TLSClientConfig: rest.TLSClientConfig{CAFile: serviceAccountDir + "/ca.crt"}}
	default:
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	if c.K8sServiceHost != "" {
		port := c.K8sServicePort
		if port == 0 {
			port = 443
		}
		rc.Host = "https://" + net.JoinHostPort(c.K8sServiceHost, strconv.Itoa(port))
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
	status, err := client.NewForConfig(rc) // each clientset has its own rate limiter
	if err != nil {
		return nil, fmt.Errorf("cilium clientset: %w", err)
	}
	return &Clients{Kube: kube, Cilium: cilium, Status: status}, nil
}
