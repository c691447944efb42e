// Package cluster brings a whole lab up and down: it plans it, creates its machines and
// credentials, runs the supervisor that keeps its processes alive, and removes it all.
package cluster

import (
	"path/filepath"

	"github.com/cilium-go/cilium/lab/internal/controlplane"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/proc"
)

// Paths of a lab's state, all below its state directory.
type layout struct{ state string }

func (l layout) record() string     { return filepath.Join(l.state, "record.json") }
func (l layout) status() string     { return filepath.Join(l.state, "status.json") }
func (l layout) kubeconfig() string { return filepath.Join(l.state, "kubeconfig") }
func (l layout) pki() string        { return filepath.Join(l.state, "pki") }
func (l layout) logs() string       { return filepath.Join(l.state, "logs") }

// Kubeconfig is the path of the user's kubeconfig for the lab in stateDir.
func Kubeconfig(stateDir string) string { return layout{stateDir}.kubeconfig() }

func controlPlaneConfig(p plan.Plan, binDir string) controlplane.Config {
	return controlplane.Config{
		Dir:              p.ControlPlaneDir,
		BinDir:           binDir,
		LabBinary:        filepath.Join(binDir, "cilium-lab"),
		AdvertiseIP:      p.ControlPlaneIP,
		SecurePort:       p.APIPort,
		ServiceCIDR:      p.ServiceCIDR,
		ClusterCIDR:      p.ClusterCIDR,
		NodeCIDRMaskSize: p.NodeMask,
		// cilium-go's operator hands out the pod CIDRs (cluster-pool IPAM).
		AllocateNodeCIDRs: p.CNI != plan.CNICilium,
		ExtraSANs:         []string{"127.0.0.1", "localhost"},
		Namespaces:        proc.Namespaces{Net: p.ControlPlaneNS},
	}
}

func nodeNamespaces(n plan.Node) proc.Namespaces {
	return proc.Namespaces{Net: n.Netns, Mnt: n.MntNS, UTS: n.UTSNS}
}
