package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/proc"
	"github.com/cilium-go/cilium/lab/internal/record"
)

// PrintStatus shows the lab's components and nodes and their health. It returns an
// error when something is unhealthy, so scripts can rely on its exit code.
func PrintStatus(ctx context.Context, w io.Writer, stateDir string) error {
	p, err := plan.Load(stateDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "lab %q in %s: %d nodes, CNI %s, kube-proxy %s, API https://127.0.0.1:%d",
		p.Name, p.StateDir, len(p.Nodes), p.CNI, p.KubeProxy, p.HostAPIPort)
	if url, err := UIURL(stateDir); err == nil && p.HostUIPort != 0 {
		fmt.Fprintf(w, ", Hubble UI %s", url)
	}
	fmt.Fprintln(w)
	st, err := ReadStatus(stateDir)
	if err != nil {
		return err
	}
	alive := false
	if start, err := record.StartTime(st.PID); err == nil && start > 0 {
		alive = true
	}
	fmt.Fprintf(w, "supervisor: pid %d, %s", st.PID, st.Phase)
	if st.Error != "" {
		fmt.Fprintf(w, " (%s)", st.Error)
	}
	if !alive {
		fmt.Fprint(w, " -- NOT RUNNING")
	}
	fmt.Fprintln(w)
	unhealthy := !alive || st.Phase != "running"

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCOMPONENT\tSTATE\tPID\tRESTARTS\tSINCE")
	for _, s := range st.Processes {
		state := "running"
		if !s.Running {
			state, unhealthy = "down: "+s.LastExit, true
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", s.Name, state, s.PID, s.Restarts, time.Since(s.Since).Round(time.Second))
	}
	tw.Flush()

	cfg, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(stateDir))
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("API server: %w", err)
	}
	// cilium-go's pod CIDRs live in the CiliumNodes.
	podCIDRs := map[string]string{}
	if dyn, err := dynamic.NewForConfig(cfg); err == nil && p.CNI == plan.CNICilium {
		if list, err := dyn.Resource(ciliumNodes).List(ctx, metav1.ListOptions{}); err == nil {
			for _, cn := range list.Items {
				cidrs, _, _ := unstructured.NestedStringSlice(cn.Object, "spec", "ipam", "podCIDRs")
				podCIDRs[cn.GetName()] = strings.Join(cidrs, ",")
			}
		}
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nNODE\tREADY\tINTERNAL-IP\tPOD-CIDR\tVERSION")
	for _, n := range nodes.Items {
		ready := "False"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = string(c.Status)
			}
		}
		if ready != "True" {
			unhealthy = true
		}
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		cidr := n.Spec.PodCIDR
		if c, ok := podCIDRs[n.Name]; ok {
			cidr = c
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, ready, ip, cidr, n.Status.NodeInfo.KubeletVersion)
	}
	tw.Flush()
	if len(nodes.Items) < len(p.Nodes) {
		unhealthy = true
	}
	if unhealthy {
		return fmt.Errorf("the lab is not healthy")
	}
	return nil
}

// Exec runs argv on a machine of the lab, wired to the caller's terminal: on a node
// inside its network, mount and UTS namespaces; on "outside" (or its full name) in
// the outside client's network namespace; on "control-plane" in the control plane's.
func Exec(stateDir, machine string, argv []string) error {
	p, err := plan.Load(stateDir)
	if err != nil {
		return err
	}
	ns, err := machineNamespaces(p, machine)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		argv = []string{"/bin/sh"}
	}
	cmd := proc.Command(proc.Spec{Path: argv[0], Args: argv[1:], Namespaces: ns, Env: os.Environ()})
	cmd.SysProcAttr = nil // interactive: stay in the caller's process group
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// On a node, the command runs in the node's cgroup like its other processes, so
	// it sees the node's socket-level load balancing.
	if n, ok := p.Node(machine); ok && n.Cgroup != "" {
		if _, err := os.Stat(n.Cgroup); err == nil {
			cg, err := proc.IntoCgroup(cmd, n.Cgroup)
			if err != nil {
				return err
			}
			defer cg.Close()
		}
	}
	return cmd.Run()
}

// machineNamespaces names the namespaces of the machine called name.
func machineNamespaces(p plan.Plan, name string) (proc.Namespaces, error) {
	switch {
	case name == "outside" || (name == p.Outside.Name && name != ""):
		if p.Outside.Netns == "" {
			return proc.Namespaces{}, fmt.Errorf("the lab in %s has no outside client: it was made by an older cilium-lab", p.StateDir)
		}
		return proc.Namespaces{Net: p.Outside.Netns}, nil
	case name == "control-plane":
		return proc.Namespaces{Net: p.ControlPlaneNS}, nil
	}
	if n, ok := p.Node(name); ok {
		return nodeNamespaces(n), nil
	}
	names := []string{"outside", "control-plane"}
	for _, n := range p.Nodes {
		names = append(names, n.Name)
	}
	return proc.Namespaces{}, fmt.Errorf("no machine %q (machines: %s)", name, strings.Join(names, ", "))
}
