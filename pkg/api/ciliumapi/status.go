package ciliumapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	cm "github.com/cilium/cilium/api/v1/models"

	"github.com/cilium-go/cilium/pkg/api/models"
)

// StatusInput is what the agent's API tells of its state.
type StatusInput struct {
	Health models.Health
	Config models.Config
	// Allocations are IPAM's addresses and their owners.
	Allocations []models.IPAMAllocation
}

// Status is the agent's state in Cilium's StatusResponse model: the
// agent's health, Kubernetes, routing, masquerading, Services and Hubble
// as the agent's flags set them. The agent has no kvstore, no
// cilium-health, no L7 proxy, no encryption and no host firewall: those
// stay unset or say Disabled, so that tools detect no such feature.
func Status(in StatusInput) *cm.StatusResponse {
	flags := in.Config.Flags
	on := func(name string) bool { return flags[name] == "true" }
	st := &cm.StatusResponse{
		Cilium:                 ciliumStatus(in.Health),
		Kubernetes:             kubernetesStatus(in.Config, in.Health),
		IdentityRange:          IdentityRange(),
		DatapathMode:           cm.DatapathMode(orDefault(in.Config.PodDevice, "veth")),
		ConfiguredDatapathMode: cm.ConfiguredDatapathMode(orDefault(in.Config.PodDevice, "veth")),
		AttachMode:             cm.AttachModeTcx,
		Routing:                routing(flags),
		Masquerading:           &cm.Masquerading{Enabled: on("enable-ipv4-masquerade"), Mode: cm.MasqueradingModeBPF},
		KubeProxyReplacement:   kubeProxyReplacement(flags),
		Hubble:                 &cm.HubbleStatus{State: cm.HubbleStatusStateDisabled},
		HostFirewall:           &cm.HostFirewall{Mode: cm.HostFirewallModeDisabled, Devices: []string{}},
		Encryption:             &cm.EncryptionStatus{Mode: cm.EncryptionStatusModeDisabled},
		CniChaining:            &cm.CNIChainingStatus{Mode: cm.CNIChainingStatusModeNone},
		Ipam:                   ipam(in.Allocations),
	}
	if st.Masquerading.Enabled {
		st.Masquerading.EnabledProtocols = &cm.MasqueradingEnabledProtocols{IPv4: true}
	}
	if on("enable-hubble") {
		st.Hubble = &cm.HubbleStatus{State: cm.HubbleStatusStateOk, Msg: "serving on " + flags["hubble-socket-path"]}
	}
	if node := flags["k8s-node-name"]; node != "" {
		st.Cluster = &cm.ClusterStatus{Self: orDefault(flags["cluster-name"], "default") + "/" + node, Nodes: []*cm.NodeElement{}}
	}
	return st
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Brief is Cilium's one-line status: OK, or the first unhealthy part
// (Kubernetes, then the agent), and whether it is OK.
func Brief(st *cm.StatusResponse) (string, bool) {
	unhealthy := func(state string) bool {
		return state == cm.StatusStateWarning || state == cm.StatusStateFailure
	}
	switch {
	case st.Kubernetes != nil && unhealthy(st.Kubernetes.State):
		return "error in kubernetes: " + st.Kubernetes.Msg, false
	case st.Cilium != nil && unhealthy(st.Cilium.State):
		return "error in cilium: " + st.Cilium.Msg, false
	}
	return "OK", true
}

// ciliumStatus is Ok, or a Warning naming the degraded modules.
func ciliumStatus(h models.Health) *cm.Status {
	var bad []string
	for _, m := range h.Modules {
		if m.Level == "Degraded" {
			bad = append(bad, fmt.Sprintf("%s: %s", m.Module, detail(m)))
		}
	}
	if h.OK || len(bad) == 0 {
		return &cm.Status{State: cm.StatusStateOk, Msg: "OK"}
	}
	return &cm.Status{State: cm.StatusStateWarning, Msg: strings.Join(bad, "; ")}
}

func detail(m models.ModuleHealth) string {
	switch {
	case m.Message != "" && m.Error != "":
		return m.Message + ": " + m.Error
	case m.Error != "":
		return m.Error
	}
	return m.Message
}

// kubernetesStatus is Disabled without Kubernetes (no --enable-k8s,
// --kubeconfig nor --k8s-node-name), else Ok unless a k8s module reports
// otherwise: the agent serves only once its watchers synced, and what
// loses the API server later says so in its own module's health.
func kubernetesStatus(cfg models.Config, h models.Health) *cm.K8sStatus {
	var k8s []models.ModuleHealth
	for _, m := range h.Modules {
		if isK8sModule(m.Module) {
			k8s = append(k8s, m)
		}
	}
	f := cfg.Flags
	if f["enable-k8s"] != "true" && f["kubeconfig"] == "" && f["k8s-node-name"] == "" && len(k8s) == 0 {
		return &cm.K8sStatus{State: cm.K8sStatusStateDisabled, K8sAPIVersions: []string{}}
	}
	out := &cm.K8sStatus{State: cm.K8sStatusStateOk, Msg: "OK", K8sAPIVersions: []string{}}
	for _, m := range k8s {
		out.Msg = detail(m)
		if m.Level == "Degraded" {
			out.State = cm.K8sStatusStateWarning
			break
		}
	}
	return out
}

// isK8sModule: the Kubernetes module and its parts report under k8s.
func isK8sModule(name string) bool { return name == "k8s" || strings.HasPrefix(name, "k8s.") }

func routing(flags map[string]string) *cm.Routing {
	r := &cm.Routing{InterHostRoutingMode: cm.RoutingInterHostRoutingModeNative,
		IntraHostRoutingMode: cm.RoutingIntraHostRoutingModeBPF}
	if flags["routing-mode"] == "tunnel" {
		r.InterHostRoutingMode, r.TunnelProtocol = cm.RoutingInterHostRoutingModeTunnel, "VXLAN"
	}
	if flags["enable-host-legacy-routing"] == "true" {
		r.IntraHostRoutingMode = cm.RoutingIntraHostRoutingModeLegacy
	}
	return r
}

// kubeProxyReplacement tells the Services the datapath balances. Its
// features always hold NodePort: cilium-cli reads it whenever features
// are there.
func kubeProxyReplacement(flags map[string]string) *cm.KubeProxyReplacement {
	if flags["kube-proxy-replacement"] != "true" {
		return &cm.KubeProxyReplacement{Mode: "False", Devices: []string{}, DeviceList: []*cm.KubeProxyReplacementDeviceListItems0{},
			Features: &cm.KubeProxyReplacementFeatures{NodePort: &cm.KubeProxyReplacementFeaturesNodePort{Acceleration: "Disabled"},
				SocketLB: &cm.KubeProxyReplacementFeaturesSocketLB{}, Annotations: []string{}}}
	}
	np := &cm.KubeProxyReplacementFeaturesNodePort{Enabled: true, Acceleration: "Disabled",
		Mode: strings.ToUpper(orDefault(flags["bpf-lb-mode"], "snat"))}
	if lo, hi, ok := strings.Cut(flags["node-port-range"], ","); ok {
		np.PortMin, _ = strconv.ParseInt(lo, 10, 64)
		np.PortMax, _ = strconv.ParseInt(hi, 10, 64)
	}
	devices := []string{}
	if d := flags["uplink"]; d != "" {
		devices = append(devices, d)
	}
	return &cm.KubeProxyReplacement{Mode: "True", Devices: devices, DeviceList: []*cm.KubeProxyReplacementDeviceListItems0{},
		Features: &cm.KubeProxyReplacementFeatures{NodePort: np, Annotations: []string{},
			SocketLB:        &cm.KubeProxyReplacementFeaturesSocketLB{Enabled: flags["bpf-lb-sock"] == "true"},
			ExternalIPs:     &cm.KubeProxyReplacementFeaturesExternalIPs{Enabled: true},
			HostPort:        &cm.KubeProxyReplacementFeaturesHostPort{Enabled: true},
			SessionAffinity: &cm.KubeProxyReplacementFeaturesSessionAffinity{Enabled: true},
		}}
}

func ipam(allocs []models.IPAMAllocation) *cm.IPAMStatus {
	out := &cm.IPAMStatus{IPv4: []string{}, IPv6: []string{}, Allocations: cm.AllocationMap{}}
	for _, a := range allocs {
		out.IPv4 = append(out.IPv4, a.IP)
		out.Allocations[a.IP] = a.Owner
	}
	slices.Sort(out.IPv4)
	return out
}
