package cni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Agent is the part of the agent's API the plugin uses; *client.Client
// is one.
type Agent interface {
	Healthz(ctx context.Context) (models.Health, error)
	Config(ctx context.Context) (models.Config, error)
	AllocateIP(ctx context.Context, owner string) (models.IPAMResponse, error)
	ReleaseIP(ctx context.Context, ip string) error
	PutEndpoint(ctx context.Context, r models.EndpointRequest) (models.Endpoint, error)
	GetEndpoint(ctx context.Context, containerID string) (models.Endpoint, error)
	DeleteEndpoint(ctx context.Context, containerID string) error
	Endpoints(ctx context.Context) ([]models.Endpoint, error)
	Allocations(ctx context.Context) ([]models.IPAMAllocation, error)
}

// Links makes the pod's device pair (veth or netkit); the datapath's functions by default.
type Links struct {
	Create func(podlink.Link) (podlink.Result, error)
	Delete func(nodeNetNS, hostIfName string) error
	Check  func(l podlink.Link, hostIfindex int) error
}

// Plugin runs one CNI command.
type Plugin struct {
	// NewAgent connects to the agent at socket.
	NewAgent func(socket string) Agent
	Links    Links
	Timeout  time.Duration
	// Stdout receives the result of ADD.
	Stdout io.Writer
}

// New is the plugin as cilium-cni runs it.
func New() *Plugin {
	return &Plugin{
		NewAgent: func(s string) Agent { return client.New(s) },
		Links:    Links{Create: podlink.Create, Delete: podlink.Delete, Check: podlink.Check},
		Timeout:  2 * time.Minute,
		Stdout:   os.Stdout,
	}
}

// Funcs are the plugin's commands for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status, GC: p.GC}
}

// agentError turns an API error into a CNI error; an unreachable agent
// is worth retrying.
func agentError(what string, err error) error {
	var urlErr *net.OpError
	if errors.As(err, &urlErr) && urlErr.Op == "dial" {
		return types.NewError(types.ErrTryAgainLater, "cilium-agent is unreachable", err.Error())
	}
	return types.NewError(types.ErrInternal, what, err.Error())
}

func (p *Plugin) setup(a *skel.CmdArgs, needNetns bool) (*NetConf, Agent, context.Context, context.CancelFunc, error) {
	conf, err := ParseConf(a.StdinData)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := checkArgs(a, needNetns); err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	return conf, p.NewAgent(conf.SocketPath), ctx, cancel, nil
}

// Add gives the container an address and an endpoint, and returns once
// the endpoint's datapath is live.
func (p *Plugin) Add(a *skel.CmdArgs) error {
	conf, agent, ctx, cancel, err := p.setup(a, true)
	if err != nil {
		return err
	}
	defer cancel()
	pod, err := ParseArgs(a.Args)
	if err != nil {
		return err
	}
	if _, err := os.Stat(a.Netns); err != nil {
		return types.NewError(types.ErrInvalidNetNS, "CNI_NETNS is not usable", err.Error())
	}
	// An ADD for a container that has an endpoint already (the runtime
	// lost our earlier answer) starts over: the old pair is replaced
	// below, and an endpoint pointing at it would be stale.
	if _, err := agent.GetEndpoint(ctx, a.ContainerID); err == nil {
		if err := agent.DeleteEndpoint(ctx, a.ContainerID); err != nil && !client.IsNotFound(err) {
			return agentError("replace endpoint", err)
		}
	} else if !client.IsNotFound(err) {
		return agentError("look up endpoint", err)
	}
	alloc, err := agent.AllocateIP(ctx, a.ContainerID)
	if err != nil {
		return agentError("allocate an address", err)
	}
	res, err := p.wire(ctx, agent, conf, a, pod, alloc)
	if err != nil {
		// The address must not leak; DeleteEndpoint frees it by owner
		// even when no endpoint exists yet.
		if derr := agent.DeleteEndpoint(ctx, a.ContainerID); derr != nil && !client.IsNotFound(derr) {
			err = errors.Join(err, derr)
		}
		return err
	}
	out, err := res.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "convert result", err.Error())
	}
	return out.PrintTo(p.Stdout)
}

func (p *Plugin) wire(ctx context.Context, agent Agent, conf *NetConf, a *skel.CmdArgs, pod PodArgs,
	alloc models.IPAMResponse) (*current.Result, error) {
	ip, err := netip.ParseAddr(alloc.Address)
	gw, gwErr := netip.ParseAddr(alloc.Gateway)
	if err != nil || gwErr != nil {
		return nil, types.NewError(types.ErrInternal, "agent returned a bad allocation", fmt.Sprintf("%+v", alloc))
	}
	// The agent knows the uplink, the routing mode and the kind of pair.
	device, agentMTU, err := podDevice(ctx, agent)
	if err != nil {
		return nil, err
	}
	mtu := conf.MTU
	if mtu == 0 {
		mtu = agentMTU
	}
	host := HostIfName(a.ContainerID, a.IfName)
	// A retried ADD may find the pair of the earlier attempt.
	if err := p.Links.Delete("", host); err != nil {
		return nil, types.NewError(types.ErrInternal, "remove stale device pair", err.Error())
	}
	link := podlink.Link{PodNetNS: a.Netns, PodIfName: a.IfName, HostIfName: host, IPv4: ip, MTU: mtu,
		Device: device}
	lr, err := p.Links.Create(link)
	if err != nil {
		return nil, types.NewError(types.ErrInternal, "create "+string(device)+" pair", err.Error())
	}
	_, err = agent.PutEndpoint(ctx, models.EndpointRequest{
		ContainerID: a.ContainerID, PodName: string(pod.K8S_POD_NAME), PodNamespace: string(pod.K8S_POD_NAMESPACE),
		IPv4: ip.String(), MAC: lr.PodMAC.String(), IfName: a.IfName, HostIfName: host,
		HostIfindex: lr.HostIfindex, NetNSPath: a.Netns,
	})
	if err != nil {
		return nil, errors.Join(agentError("create endpoint", err), p.Links.Delete("", host))
	}
	gwIP := net.IP(gw.AsSlice())
	return &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: host, Mac: lr.HostMAC.String()},
			{Name: a.IfName, Mac: lr.PodMAC.String(), Mtu: mtu, Sandbox: a.Netns},
		},
		IPs: []*current.IPConfig{{Interface: current.Int(1),
			Address: net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}, Gateway: gwIP}},
		Routes: []*types.Route{{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: gwIP}},
	}, nil
}

// podDevice asks the agent which pair pods get (--datapath-mode) and
// their MTU.
func podDevice(ctx context.Context, agent Agent) (podlink.Device, int, error) {
	cfg, err := agent.Config(ctx)
	if err != nil {
		return "", 0, agentError("read the agent's configuration", err)
	}
	device, err := podlink.ParseDevice(cfg.PodDevice)
	if err != nil {
		return "", 0, types.NewError(types.ErrInternal, "agent asks for an unknown pod device", err.Error())
	}
	return device, cfg.PodMTU, nil
}

// Del removes the container's endpoint, address and device pair. Unknown
// containers and vanished namespaces are no error: the runtime calls DEL
// as often as it likes.
func (p *Plugin) Del(a *skel.CmdArgs) error {
	_, agent, ctx, cancel, err := p.setup(a, false)
	if err != nil {
		return err
	}
	defer cancel()
	if err := agent.DeleteEndpoint(ctx, a.ContainerID); err != nil && !client.IsNotFound(err) {
		return agentError("delete endpoint", err)
	}
	if err := p.Links.Delete("", HostIfName(a.ContainerID, a.IfName)); err != nil {
		return types.NewError(types.ErrInternal, "delete device pair", err.Error())
	}
	return nil
}

// Check verifies the endpoint and the device pair against the previous result.
func (p *Plugin) Check(a *skel.CmdArgs) error {
	conf, agent, ctx, cancel, err := p.setup(a, true)
	if err != nil {
		return err
	}
	defer cancel()
	if conf.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "CHECK needs prevResult", "")
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil || len(prev.IPs) != 1 {
		return types.NewError(types.ErrDecodingFailure, "prevResult is not one of ours", fmt.Sprint(err))
	}
	ep, err := agent.GetEndpoint(ctx, a.ContainerID)
	if client.IsNotFound(err) {
		return types.NewError(types.ErrUnknownContainer, "no endpoint for the container", a.ContainerID)
	}
	if err != nil {
		return agentError("get endpoint", err)
	}
	if got := prev.IPs[0].Address.IP.String(); got != ep.IPv4 {
		return types.NewError(types.ErrInternal, "address differs", fmt.Sprintf("prevResult %s, endpoint %s", got, ep.IPv4))
	}
	// A pod made before a change of --datapath-mode fails here until it
	// is made again: its pair is not what the node now gives pods.
	device, _, err := podDevice(ctx, agent)
	if err != nil {
		return err
	}
	ip, _ := netip.ParseAddr(ep.IPv4)
	link := podlink.Link{PodNetNS: a.Netns, PodIfName: a.IfName, HostIfName: ep.HostIfName, IPv4: ip, Device: device}
	if err := p.Links.Check(link, ep.HostIfindex); err != nil {
		return types.NewError(types.ErrInternal, "device pair is not as created", err.Error())
	}
	return nil
}

// Status reports whether the agent can take ADDs.
func (p *Plugin) Status(a *skel.CmdArgs) error {
	conf, err := ParseConf(a.StdinData)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	h, err := p.NewAgent(conf.SocketPath).Healthz(ctx)
	if err == nil {
		return nil
	}
	var apiErr *models.Error
	if errors.As(err, &apiErr) {
		return types.NewError(types.ErrLimitedConnectivity, "cilium-agent is degraded", fmt.Sprintf("%v: %+v", err, h.Modules))
	}
	return types.NewError(types.ErrPluginNotAvailable, "cilium-agent is unreachable", err.Error())
}

// GC deletes the endpoints of attachments the runtime no longer has, and
// frees the addresses of containers that have no valid attachment, such
// as those an agent crash left between allocation and endpoint.
func (p *Plugin) GC(a *skel.CmdArgs) error {
	conf, err := ParseConf(a.StdinData)
	if err != nil {
		return err
	}
	validList, err := ValidAttachments(a.StdinData)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	agent := p.NewAgent(conf.SocketPath)
	eps, err := agent.Endpoints(ctx)
	if err != nil {
		return agentError("list endpoints", err)
	}
	allocs, err := agent.Allocations(ctx)
	if err != nil {
		return agentError("list addresses", err)
	}
	valid := map[types.GCAttachment]bool{}
	validContainer := map[string]bool{}
	for _, v := range validList {
		valid[v] = true
		validContainer[v.ContainerID] = true
	}
	var errs []error
	withEndpoint := map[string]bool{}
	for _, ep := range eps {
		withEndpoint[ep.ContainerID] = true
		// The agent's health endpoint is no runtime's attachment.
		if ep.Identity == identity.Health || valid[types.GCAttachment{ContainerID: ep.ContainerID, IfName: ep.IfName}] {
			continue
		}
		if err := agent.DeleteEndpoint(ctx, ep.ContainerID); err != nil && !client.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("endpoint %d: %w", ep.ID, err))
		}
		if err := p.Links.Delete("", ep.HostIfName); err != nil {
			errs = append(errs, fmt.Errorf("endpoint %d device pair: %w", ep.ID, err))
		}
	}
	// An address without an endpoint: deleting the endpoint of its owner
	// frees it by owner, so an address handed to someone else meanwhile
	// stays theirs.
	for _, al := range allocs {
		if validContainer[al.Owner] || withEndpoint[al.Owner] {
			continue
		}
		if err := agent.DeleteEndpoint(ctx, al.Owner); err != nil && !client.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("address %s of %s: %w", al.IP, al.Owner, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return types.NewError(types.ErrInternal, "garbage collection incomplete", err.Error())
	}
	return nil
}
