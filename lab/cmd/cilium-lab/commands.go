package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/lab/internal/cluster"
	"github.com/cilium-go/cilium/lab/internal/etcd"
	"github.com/cilium-go/cilium/lab/internal/machine"
	"github.com/cilium-go/cilium/lab/internal/nodeagent"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/podruntime"
	"github.com/cilium-go/cilium/lab/internal/world"
)

func newRootCommand() *cobra.Command {
	stateDir := plan.DefaultOptions().StateDir
	root := &cobra.Command{
		Use:           "cilium-lab",
		Short:         "A local Kubernetes cluster whose nodes are Linux namespaces",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.PersistentFlags().StringVar(&stateDir, "state-dir", stateDir, "where the lab keeps its state")
	root.AddCommand(
		upCommand(&stateDir), downCommand(&stateDir), statusCommand(&stateDir),
		kubeconfigCommand(&stateDir), execCommand(&stateDir),
		connectivityTestFlagsCommand(&stateDir),
		superviseCommand(&stateDir), nodeAgentCommand(), nodeInitCommand(), podInitCommand(), etcdCommand(),
		worldServerCommand(),
	)
	return root
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// binDir is the directory of this executable: the lab's other binaries sit beside it.
func binDir() string {
	self, err := os.Executable()
	if err != nil {
		return "bin"
	}
	return filepath.Dir(self)
}

func upCommand(stateDir *string) *cobra.Command {
	o := plan.DefaultOptions()
	var underlay, clusterCIDR, serviceCIDR, worldCIDR string
	uo := cluster.UpOptions{Timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create the lab and wait until its nodes are Ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			for _, f := range []struct {
				name string
				s    string
				p    *netip.Prefix
			}{{"--underlay", underlay, &o.Underlay}, {"--cluster-cidr", clusterCIDR, &o.ClusterCIDR}, {"--service-cidr", serviceCIDR, &o.ServiceCIDR},
				{"--world-cidr", worldCIDR, &o.World}} {
				if *f.p, err = netip.ParsePrefix(f.s); err != nil {
					return fmt.Errorf("%s %q: %w", f.name, f.s, err)
				}
			}
			if os.Geteuid() != 0 {
				return errors.New("cilium-lab up must run as root: it creates network namespaces")
			}
			o.StateDir = *stateDir
			if o.InstallDir, err = filepath.Abs(o.InstallDir); err != nil {
				return fmt.Errorf("--install-dir: %w", err)
			}
			uo.Plan, uo.BinDir, uo.Out = o, binDir(), cmd.OutOrStdout()
			ctx, cancel := signalContext()
			defer cancel()
			return cluster.Up(ctx, uo)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", o.Name, "name of the lab: prefix of its namespaces")
	f.IntVar(&o.Nodes, "nodes", o.Nodes, "number of nodes")
	f.StringVar(&o.CNI, "cni", o.CNI, "pod network: cilium (cilium-go) or bridge (the reference plugins)")
	f.StringVar(&o.RoutingMode, "routing-mode", o.RoutingMode, "with --cni=cilium: tunnel (VXLAN) or native")
	o.InstallDir = filepath.Join(filepath.Dir(binDir()), "install", "kubernetes")
	f.StringVar(&o.InstallDir, "install-dir", o.InstallDir, "with --cni=cilium: the repository's install/kubernetes, whose RBAC the lab applies")
	f.StringVar(&o.CiliumAs, "cilium-as", o.CiliumAs, "with --cni=cilium: pods (install/kubernetes applied: the cilium DaemonSet, the operator and hubble-relay Deployments, as users install it) or processes (the supervisor runs them in the nodes: quicker to iterate on)")
	f.StringVar(&o.KubeProxy, "kube-proxy", o.KubeProxy, "kube-proxy on every node: none (cilium-go's kube-proxy replacement; the default with --cni=cilium), iptables (the default with --cni=bridge) or nftables")
	f.StringSliceVar(&o.Zones, "zones", o.Zones, "the nodes' zones (their topology.kubernetes.io/zone label), in turn: --zones a,b puts node 1 in a, node 2 in b, node 3 in a, ...; none by default")
	f.BoolVar(&o.HubbleExport, "hubble-export", o.HubbleExport, "with --cni=cilium: every agent exports its flows to the node's "+plan.HubbleExportFile+" (hubble observe --input-file reads it)")
	f.StringVar(&underlay, "underlay", o.Underlay.String(), "IPv4 prefix of the network joining the machines")
	f.StringVar(&clusterCIDR, "cluster-cidr", o.ClusterCIDR.String(), "IPv4 prefix pods get addresses from")
	f.IntVar(&o.NodeMask, "node-cidr-mask-size", o.NodeMask, "prefix length of each node's pod CIDR")
	f.StringVar(&serviceCIDR, "service-cidr", o.ServiceCIDR.String(), "IPv4 prefix of Service ClusterIPs")
	f.StringVar(&worldCIDR, "world-cidr", o.World.String(), "IPv4 prefix of the world the outside client serves: "+
		plan.WorldTargetName+" at its first address, "+plan.WorldOtherName+" at its second (see connectivity-test-flags), "+
		"then the names of Cilium's guides ("+strings.Join(plan.GuideNames, ", ")+") while it has room")
	f.IntVar(&o.APIPort, "api-port", o.APIPort, "port on the host's 127.0.0.1 where kubectl reaches the API server")
	f.IntVar(&o.UIPort, "ui-port", o.UIPort, "with cilium-go as pods: port on the host's 127.0.0.1 where the browser reaches Hubble UI (the hubble-ui Service); "+
		"when taken, a free one, which up and status print; 0: none")
	f.BoolVar(&uo.KeepOnFailure, "keep-on-failure", false, "leave a lab that failed to start in place for inspection")
	f.DurationVar(&uo.Timeout, "timeout", uo.Timeout, "how long to wait for the lab to become ready")
	return cmd
}

func downCommand(stateDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Remove every namespace, mount, process and file of the lab (safe to run twice)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			if err := cluster.Down(*stateDir); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "The lab in %s is down (%s).\n", *stateDir, time.Since(start).Round(10*time.Millisecond))
			return nil
		},
	}
}

func statusCommand(stateDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the lab's components and nodes and their health",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			return cluster.PrintStatus(ctx, cmd.OutOrStdout(), *stateDir)
		},
	}
}

func kubeconfigCommand(stateDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the path of the lab's kubeconfig (export KUBECONFIG=$(cilium-lab kubeconfig))",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := cluster.Kubeconfig(*stateDir)
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("no lab in %s: run `cilium-lab up`", *stateDir)
			}
			fmt.Fprintln(cmd.OutOrStdout(), path)
			return nil
		},
	}
}

func execCommand(stateDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "exec NODE|outside|control-plane -- COMMAND [ARG...]",
		Short: "Run a command on a node (in its network, mount and UTS namespaces), on the outside client or in the control plane's network",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := cluster.Exec(*stateDir, args[0], args[1:])
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				os.Exit(exit.ExitCode())
			}
			return err
		},
	}
}

func connectivityTestFlagsCommand(stateDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "connectivity-test-flags",
		Short: "Print the flags that point cilium-cli's connectivity test at the lab's world: cilium connectivity test $(cilium-lab connectivity-test-flags)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := plan.Load(*stateDir)
			if err != nil {
				return err
			}
			flags, err := p.World.ConnectivityTestFlags()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(flags, " "))
			return nil
		},
	}
}

func superviseCommand(stateDir *string) *cobra.Command {
	bin := binDir()
	cmd := &cobra.Command{
		Use:    "supervise",
		Short:  "Keep the lab's processes running (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			return cluster.Supervise(ctx, *stateDir, bin, log)
		},
	}
	cmd.Flags().StringVar(&bin, "bin-dir", bin, "directory of the lab's binaries")
	return cmd
}

func nodeAgentCommand() *cobra.Command {
	var cfg nodeagent.Config
	var nodeIP, dns string
	cmd := &cobra.Command{
		Use:    "node-agent",
		Short:  "Run a lab node (the lab's kubelet)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var err error
			if cfg.NodeIP, err = netip.ParseAddr(nodeIP); err != nil {
				return fmt.Errorf("--node-ip: %w", err)
			}
			if cfg.ClusterDNS, err = netip.ParseAddr(dns); err != nil {
				return fmt.Errorf("--cluster-dns: %w", err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", cfg.Node)
			return nodeagent.Run(ctx, cfg, log)
		},
	}
	cfg.DefaultPaths()
	f := cmd.Flags()
	f.StringVar(&cfg.Node, "node", "", "node name")
	f.StringVar(&nodeIP, "node-ip", "", "node's internal IP")
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "the node's kubeconfig")
	f.StringVar(&cfg.ServingCert, "serving-cert", "", "certificate of the node's API")
	f.StringVar(&cfg.ServingKey, "serving-key", "", "key of --serving-cert")
	f.StringVar(&cfg.ClientCA, "client-ca", "", "CA of clients of the node's API")
	f.StringVar(&cfg.APIClientUser, "api-client-user", "", "the only user allowed on the node's API")
	f.StringVar(&cfg.BinDir, "bin-dir", binDir(), "directory of the binaries images map to")
	f.StringVar(&dns, "cluster-dns", "", "cluster DNS address")
	f.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster domain")
	f.BoolVar(&cfg.BridgeCNI, "bridge-cni", false, "install the reference bridge network for the node's pod CIDR")
	f.StringVar(&cfg.Zone, "zone", "", "the node's zone: its topology.kubernetes.io/zone label (none when empty)")
	f.StringVar(&cfg.CNIConfDir, "cni-conf-dir", cfg.CNIConfDir, "CNI configuration directory")
	f.StringVar(&cfg.CNIBinDir, "cni-bin-dir", cfg.CNIBinDir, "CNI plugin directory")
	f.StringVar(&cfg.PodsDir, "pods-dir", cfg.PodsDir, "directory of pod state")
	return cmd
}

func nodeInitCommand() *cobra.Command {
	var hostname string
	var binds []string
	cmd := &cobra.Command{
		Use:    "node-init",
		Short:  "Prepare a new node mount namespace (run by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return machine.NodeInit(hostname, binds)
		},
	}
	cmd.Flags().StringVar(&hostname, "hostname", "", "hostname of the node")
	cmd.Flags().StringArrayVar(&binds, "bind", nil, "SRC:DST bind mount")
	return cmd
}

func podInitCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "pod-init",
		Short:              "Hold a pod's namespaces (run by the node agent)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(podruntime.SandboxMain(args))
		},
	}
}

func worldServerCommand() *cobra.Command {
	cfg := world.DefaultConfig()
	cmd := &cobra.Command{
		Use:    "world-server",
		Short:  "Serve the lab's world, HTTP and HTTPS on its addresses (run by the supervisor in the outside client)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			s, err := world.Listen(cfg)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			return s.Serve(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)))
		},
	}
	cfg.Flags(cmd.Flags())
	return cmd
}

func etcdCommand() *cobra.Command {
	cfg := etcd.DefaultConfig()
	cmd := &cobra.Command{
		Use:    "etcd",
		Short:  "Run the lab's embedded etcd",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			return etcd.Run(ctx, cfg)
		},
	}
	cfg.Flags(cmd.Flags())
	return cmd
}
