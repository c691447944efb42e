// Package k8s gives the operator its Kubernetes clients, built once from
// --kubeconfig or, when that is empty, from the pod's in-cluster config.
package k8s

import (
	"fmt"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	ciliumclient "github.com/cilium-go/cilium/pkg/k8s/client"
)

// Cell provides Clients.
var Cell = cell.Module("k8s-client", "Kubernetes clients",
	cell.Config(DefaultConfig),
	cell.Provide(newClients),
)

// Config says where the API server is.
type Config struct {
	Kubeconfig string  `mapstructure:"kubeconfig"`
	QPS        float32 `mapstructure:"k8s-client-qps"`
	Burst      int     `mapstructure:"k8s-client-burst"`
}

// DefaultConfig uses the in-cluster config.
var DefaultConfig = Config{QPS: 20, Burst: 40}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("kubeconfig", d.Kubeconfig, "kubeconfig file of the cluster (empty: in-cluster service account)")
	fs.Float32("k8s-client-qps", d.QPS, "queries per second to the API server")
	fs.Int("k8s-client-burst", d.Burst, "burst of queries to the API server")
}

// Clients are the typed clientsets the operator uses.
type Clients struct {
	Kube    kubernetes.Interface
	Cilium  ciliumclient.Interface
	APIExts apiextclient.Interface
}

func newClients(c Config) (Clients, error) {
	cfg, err := restConfig(c.Kubeconfig)
	if err != nil {
		return Clients{}, err
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	cfg.UserAgent = "cilium-operator"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	cil, err := ciliumclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("cilium client: %w", err)
	}
	ext, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("apiextensions client: %w", err)
	}
	return Clients{Kube: kube, Cilium: cil, APIExts: ext}, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (or set --kubeconfig): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
