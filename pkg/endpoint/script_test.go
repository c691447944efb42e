package endpoint_test

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/paths"
)

// The scripts in testdata create and delete endpoints through the
// manager, and put what an earlier agent left on disk and in the datapath
// before the start; they read the endpoints table and the datapath out.
// The flags of a script's "#!" line are the agent's. TestScript runs them
// against the datapath in memory, TestPrivilegedScript against a real one
// (programs, maps and veths in namespaces of the test's own): the same
// scripts, the same output.
func TestScript(t *testing.T) {
	runScripts(t, func(testing.TB) scriptDatapath {
		dp := endpointtest.NewDatapath()
		return scriptDatapath{
			Datapath: dp,
			list:     func() ([]spec.Endpoint, error) { return dp.All(), nil },
			put: func(ep spec.Endpoint) error {
				dp.Put(ep)
				return nil
			},
			link: func(host string, ip netip.Addr) (podLink, error) {
				a := ip.As4()
				return podLink{mac: fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3]),
					ifindex: 100 + int(a[3]), netns: "/proc/1/ns/net"}, nil
			},
		}
	})
}

func TestPrivilegedScript(t *testing.T) {
	testenv.Privileged(t)
	runScripts(t, realDatapath)
}

// scriptDatapath is the endpoint datapath a script runs against, and what
// the script commands need of it besides.
type scriptDatapath struct {
	endpoint.Datapath
	// list is what the datapath holds, by id.
	list func() ([]spec.Endpoint, error)
	// put programs ep behind the manager's back.
	put func(ep spec.Endpoint) error
	// link makes the pod's device pair, as the CNI plugin does.
	link func(host string, ip netip.Addr) (podLink, error)
}

type podLink struct {
	mac     string
	ifindex int
	netns   string
}

// realDatapath starts a datapath node in a namespace of its own; each
// pod gets a namespace and a veth pair.
func realDatapath(t testing.TB) scriptDatapath {
	ns := testenv.NewNetNS(t)
	n := dptest.StartNode(t, ns)
	link := func(host string, ip netip.Addr) (podLink, error) {
		pod := testenv.NewNetNS(t)
		res, err := podlink.Create(podlink.Link{NodeNetNS: ns, PodNetNS: pod, PodIfName: "eth0", HostIfName: host, IPv4: ip})
		return podLink{mac: res.PodMAC.String(), ifindex: res.HostIfindex, netns: pod}, err
	}
	return scriptDatapath{
		Datapath: n,
		list: func() ([]spec.Endpoint, error) {
			entries, err := n.Maps().EndpointEntries()
			if err != nil {
				return nil, err
			}
			nl, err := netnamespace.Netlink(ns)
			if err != nil {
				return nil, err
			}
			defer nl.Close()
			var out []spec.Endpoint
			for _, e := range entries {
				ep := spec.Endpoint{ID: e.ID, Identity: e.Identity, IPv4: e.IPv4}
				if l, err := nl.LinkByIndex(e.HostIfindex); err == nil {
					ep.HostDevice = l.Attrs().Name
				}
				out = append(out, ep)
			}
			slices.SortFunc(out, func(a, b spec.Endpoint) int { return cmp.Compare(a.ID, b.ID) })
			return out, nil
		},
		put: func(ep spec.Endpoint) error {
			l, err := link(ep.HostDevice, ep.IPv4)
			if err != nil {
				return err
			}
			ep.MAC, _ = net.ParseMAC(l.mac)
			return n.UpsertEndpoint(ep)
		},
		link: link,
	}
}

func runScripts(t *testing.T, newDatapath func(testing.TB) scriptDatapath) {
	testenv.RunHiveScripts(t, func(t testing.TB, args []string) (*hive.Hive, map[string]script.Cmd) {
		dp := newDatapath(t)
		var mgr *endpoint.Manager
		var cfg paths.Config
		h := health.NewHive(job.Cell, statedb.Cell, health.Cell, paths.Cell, ipam.Cell, endpoint.Cell,
			cell.Provide(endpoint.NewInitIdentityAllocator, func() endpoint.Datapath { return dp.Datapath }, prometheus.NewRegistry),
			cell.Invoke(func(m *endpoint.Manager, c paths.Config) { mgr, cfg = m, c }))
		fs := pflag.NewFlagSet("", pflag.ContinueOnError)
		h.RegisterFlags(fs)
		if err := fs.Parse(append([]string{"--state-dir=" + t.TempDir()}, args...)); err != nil {
			t.Fatal(err)
		}
		return h, endpointCmds(func() *endpoint.Manager { return mgr }, dp, func() string { return endpoint.StateDir(cfg) })
	})
}

func endpointCmds(mgr func() *endpoint.Manager, dp scriptDatapath, stateDir func() string) map[string]script.Cmd {
	// A pod's device pair is made once; asking again (a CNI ADD retried)
	// finds it.
	links := map[string]podLink{}
	link := func(ip netip.Addr) (string, podLink, error) {
		host := hostDevice(ip)
		if l, ok := links[host]; ok {
			return host, l, nil
		}
		l, err := dp.link(host, ip)
		if err == nil {
			links[host] = l
		}
		return host, l, err
	}
	return map[string]script.Cmd{
		"endpoint/create": script.Command(script.CmdUsage{Summary: "create a pod's endpoint, as a CNI ADD does",
			Args: "container namespace/pod ipv4"}, func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 3 {
				return nil, script.ErrUsage
			}
			ns, pod, ok := strings.Cut(args[1], "/")
			ip, err := netip.ParseAddr(args[2])
			if !ok || err != nil || !ip.Is4() {
				return nil, script.ErrUsage
			}
			host, l, err := link(ip)
			if err != nil {
				return nil, err
			}
			_, _, err = mgr().Create(s.Context(), endpoint.Spec{ContainerID: args[0], PodNamespace: ns, PodName: pod,
				IPv4: ip, MAC: l.mac, IfName: "eth0", HostIfName: host, HostIfindex: l.ifindex, NetNSPath: l.netns})
			return withStderr(err)
		}),
		"endpoint/delete": script.Command(script.CmdUsage{Summary: "delete a pod's endpoint, as a CNI DEL does",
			Args: "container"}, func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			_, err := mgr().Delete(s.Context(), args[0])
			return withStderr(err)
		}),
		"endpoint/persist": script.Command(script.CmdUsage{Summary: "put an endpoint's state file where an earlier agent kept it",
			Args: "file"}, func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			b, err := os.ReadFile(s.Path(args[0]))
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(stateDir(), 0o700); err != nil {
				return nil, err
			}
			return nil, os.WriteFile(filepath.Join(stateDir(), filepath.Base(args[0])), b, 0o600)
		}),
		"endpoint/link": script.Command(script.CmdUsage{Summary: "make a pod's device pair, as a pod an earlier agent wired keeps it",
			Args: "ipv4"}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			ip, err := netip.ParseAddr(args[0])
			if err != nil {
				return nil, err
			}
			_, _, err = link(ip)
			return nil, err
		}),
		"endpoint/datapath": script.Command(script.CmdUsage{Summary: "the endpoints the datapath holds: id, ipv4, identity, device"},
			func(*script.State, ...string) (script.WaitFunc, error) {
				eps, err := dp.list()
				if err != nil {
					return nil, err
				}
				var b strings.Builder
				for _, ep := range eps {
					fmt.Fprintf(&b, "%d %s %d %s\n", ep.ID, ep.IPv4, ep.Identity, ep.HostDevice)
				}
				return func(*script.State) (string, string, error) { return b.String(), "", nil }, nil
			}),
		"endpoint/datapath-put": script.Command(script.CmdUsage{Summary: "program an endpoint behind the manager's back",
			Args: "id ipv4"}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 2 {
				return nil, script.ErrUsage
			}
			id, err := strconv.ParseUint(args[0], 10, 16)
			if err != nil {
				return nil, err
			}
			ip, err := netip.ParseAddr(args[1])
			if err != nil {
				return nil, err
			}
			return nil, dp.put(spec.Endpoint{ID: uint16(id), IPv4: ip, Identity: identity.Init, HostDevice: hostDevice(ip)})
		}),
	}
}

// withStderr makes a command's error its stderr too, for the script to
// match.
func withStderr(err error) (script.WaitFunc, error) {
	if err == nil {
		return nil, nil
	}
	return func(*script.State) (string, string, error) { return "", err.Error() + "\n", err }, nil
}

// hostDevice names a pod's host-side device after its address.
func hostDevice(ip netip.Addr) string { return "lxc" + strconv.Itoa(int(ip.As4()[3])) }
