package controlplane

import (
	"path/filepath"
	"strconv"

	"github.com/cilium-go/cilium/lab/internal/etcd"
	"github.com/cilium-go/cilium/lab/internal/pki"
	"github.com/cilium-go/cilium/lab/internal/proc"
)

// serviceAccountIssuer is the iss claim of service-account tokens; it is also their
// default audience.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// Processes returns the control plane's processes in start order: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler. The API server waits for
// etcd by itself, but the controller manager exits at once when the API server is not
// reachable yet (it reads the extension-apiserver-authentication ConfigMap at start),
// so the supervisor either restarts it or starts it once /readyz answers.
func Processes(cfg Config) []proc.Spec {
	spec := func(name, path string, args []string) proc.Spec {
		return proc.Spec{
			Name:       name,
			Path:       path,
			Args:       args,
			Dir:        cfg.Dir,
			Namespaces: cfg.Namespaces,
			LogFile:    filepath.Join(paths(cfg).logs, name+".log"),
		}
	}
	return []proc.Spec{
		spec("etcd", cfg.LabBinary, append([]string{"etcd"}, etcdConfig(cfg).Args()...)),
		spec("kube-apiserver", filepath.Join(cfg.BinDir, "kube-apiserver"), apiserverArgs(cfg)),
		spec("kube-controller-manager", filepath.Join(cfg.BinDir, "kube-controller-manager"), controllerManagerArgs(cfg)),
		spec("kube-scheduler", filepath.Join(cfg.BinDir, "kube-scheduler"), schedulerArgs(cfg)),
	}
}

// etcdConfig is the embedded etcd's configuration. fsync is off because the lab is
// disposable and etcd's fsyncs dominate start-up and write latency on shared disks.
func etcdConfig(cfg Config) etcd.Config {
	l := paths(cfg)
	e := etcd.DefaultConfig()
	e.DataDir = l.etcdData
	e.CertFile, e.KeyFile, e.CAFile = l.etcdCert, l.etcdKey, l.caCert
	e.UnsafeNoFsync = true
	return e
}

func apiserverArgs(cfg Config) []string {
	l := paths(cfg)
	return []string{
		"--advertise-address=" + cfg.AdvertiseIP.String(),
		// Inside the control-plane namespace the only addresses are the advertise
		// address and loopback; the forwarder for the user's kubectl uses either.
		"--bind-address=0.0.0.0",
		"--secure-port=" + strconv.Itoa(cfg.SecurePort),
		"--tls-cert-file=" + l.apiserverCert,
		"--tls-private-key-file=" + l.apiserverKey,
		"--client-ca-file=" + l.caCert,

		"--etcd-servers=" + etcdConfig(cfg).ClientURL(),
		"--etcd-cafile=" + l.caCert,
		"--etcd-certfile=" + l.etcdClientCert,
		"--etcd-keyfile=" + l.etcdClientKey,

		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true", // agent DaemonSets (Cilium's own) need privileged pods

		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + l.saPub,
		"--service-account-signing-key-file=" + l.saKey,
		"--service-cluster-ip-range=" + cfg.ServiceCIDR.Masked().String(),

		"--requestheader-client-ca-file=" + filepath.Join(l.frontProxyCA, pki.CACertFile),
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + l.frontProxyClient + ".crt",
		"--proxy-client-key-file=" + l.frontProxyClient + ".key",

		"--kubelet-client-certificate=" + l.kubeletClientCert,
		"--kubelet-client-key=" + l.kubeletClientKey,
		"--kubelet-certificate-authority=" + l.caCert,
		"--kubelet-preferred-address-types=InternalIP",

		"--profiling=false",
	}
}

func controllerManagerArgs(cfg Config) []string {
	l := paths(cfg)
	return []string{
		"--kubeconfig=" + l.kcmConf,
		// Delegated authentication and authorization of requests to its own secure
		// port go through the API server with the same identity.
		"--authentication-kubeconfig=" + l.kcmConf,
		"--authorization-kubeconfig=" + l.kcmConf,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ControllerManagerPort),
		"--tls-cert-file=" + l.kcmServingCert,
		"--tls-private-key-file=" + l.kcmServingKey,
		"--client-ca-file=" + l.caCert,

		"--cluster-name=" + ClusterName,
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--root-ca-file=" + l.caCert,
		"--service-account-private-key-file=" + l.saKey,
		"--cluster-signing-cert-file=" + l.caCert,
		"--cluster-signing-key-file=" + l.caKey,

		"--allocate-node-cidrs=" + strconv.FormatBool(cfg.AllocateNodeCIDRs),
		"--cluster-cidr=" + cfg.ClusterCIDR.Masked().String(),
		"--node-cidr-mask-size=" + strconv.Itoa(cfg.NodeCIDRMaskSize),
		"--service-cluster-ip-range=" + cfg.ServiceCIDR.Masked().String(),
		// There is no cloud provider to program routes into; the lab routes pod CIDRs
		// itself.
		"--configure-cloud-routes=false",

		// One instance: without leader election a restarted controller manager works
		// at once instead of waiting for the previous lease to expire.
		"--leader-elect=false",
		"--profiling=false",
	}
}

func schedulerArgs(cfg Config) []string {
	l := paths(cfg)
	return []string{
		"--config=" + l.schedulerConfig,
		"--authentication-kubeconfig=" + l.schedConf,
		"--authorization-kubeconfig=" + l.schedConf,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(SchedulerPort),
		"--tls-cert-file=" + l.schedServingCert,
		"--tls-private-key-file=" + l.schedServingKey,
		"--client-ca-file=" + l.caCert,
	}
}
