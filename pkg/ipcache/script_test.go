package ipcache_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/ipcache/ipcachetest"
	"github.com/cilium-go/cilium/pkg/k8s/agent/agenttest"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/node"
	"github.com/cilium-go/cilium/pkg/node/nodetest"
)

// The scripts in testdata put Kubernetes objects and local endpoints in
// and read the ipcache and node-routes tables, the ipcache map and the
// routes out. TestScript runs them against the datapath in memory,
// TestPrivilegedScript against a real one (pinned maps, routes in a
// namespace of the test's own): the same scripts, the same output.
func TestScript(t *testing.T) {
	runScripts(t, func(testing.TB) (ipcache.Map, node.Routes) {
		return ipcachetest.New(nil), nodetest.New(nil)
	})
}

func TestPrivilegedScript(t *testing.T) {
	testenv.Privileged(t)
	runScripts(t, realDatapath)
}

// realDatapath starts a datapath node in a namespace of its own, its
// uplink on 192.168.77.0/24, where the scripts' nodes live.
func realDatapath(t testing.TB) (ipcache.Map, node.Routes) {
	n := dptest.StartNode(t, testenv.NewNetNS(t))
	return n.Maps(), n
}

func runScripts(t *testing.T, newDatapath func(testing.TB) (ipcache.Map, node.Routes)) {
	testenv.RunHiveScripts(t, func(t testing.TB, args []string) (*hive.Hive, map[string]script.Cmd) {
		m, routes := newDatapath(t)
		cells := []cell.Cell{
			job.Cell, statedb.Cell, health.Cell,
			cell.Provide(endpoint.NewTable, statedb.RWTable[*endpoint.EndpointRow].ToTable),
			ipcache.Cell,
			cell.Provide(
				func() ipcache.MapSource { return func() ipcache.Map { return m } },
				func() node.Routes { return routes },
			),
		}
		cmds := map[string]script.Cmd{}
		// "#! --k8s=false" runs a script with Kubernetes off: no source.
		if !slices.Contains(args, "--k8s=false") {
			c, k8sCells := agenttest.Cells("node-a", nil)
			cells = append(cells, k8sCells)
			maps.Copy(cmds, k8stest.ScriptCmds(k8stest.Trackers{
				Kube: c.Kube.(*kubefake.Clientset).Tracker(), Cilium: c.Cilium.(*client.Fake).Tracker}))
		}
		cmds["ipcache/map"] = listCmd("the datapath's ipcache map: prefix, identity, tunnel endpoint", func() ([]string, error) {
			entries, err := m.IPCacheEntries()
			var out []string
			for p, e := range entries {
				out = append(out, fmt.Sprintf("%s %d %s", p, e.Identity, addrOrDash(e.TunnelEndpoint)))
			}
			return out, err
		})
		cmds["routes"] = listCmd("the datapath's routes to other nodes' pods: pod CIDR, node", func() ([]string, error) {
			rs, err := routes.RemoteNodes()
			var out []string
			for _, r := range rs {
				out = append(out, fmt.Sprintf("%s %s", r.PodCIDR, addrOrDash(r.IPv4)))
			}
			return out, err
		})
		cmds["ipcache/map-put"] = script.Command(script.CmdUsage{Summary: "write an entry into the ipcache map behind the reconciler's back",
			Args: "prefix identity"}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 2 {
				return nil, script.ErrUsage
			}
			p, err := netip.ParsePrefix(args[0])
			if err != nil {
				return nil, err
			}
			id, err := strconv.ParseUint(args[1], 10, 32)
			if err != nil {
				return nil, err
			}
			return nil, m.UpsertIPCache(p, spec.IPCacheEntry{Identity: identity.NumericIdentity(id)})
		})
		cmds["routes/put"] = script.Command(script.CmdUsage{Summary: "install a route to a node's pods behind the reconciler's back",
			Args: "pod-cidr node"}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 2 {
				return nil, script.ErrUsage
			}
			p, err := netip.ParsePrefix(args[0])
			if err != nil {
				return nil, err
			}
			a, err := netip.ParseAddr(args[1])
			if err != nil {
				return nil, err
			}
			return nil, routes.UpsertRemoteNode(spec.RemoteNode{IPv4: a, PodCIDR: p})
		})
		return health.NewHive(cells...), cmds
	})
}

// listCmd prints list's lines sorted, one a line, for cmp.
func listCmd(summary string, list func() ([]string, error)) script.Cmd {
	return script.Command(script.CmdUsage{Summary: summary},
		func(*script.State, ...string) (script.WaitFunc, error) {
			lines, err := list()
			if err != nil {
				return nil, err
			}
			slices.Sort(lines)
			return func(*script.State) (string, string, error) {
				if len(lines) == 0 {
					return "", "", nil
				}
				return strings.Join(lines, "\n") + "\n", "", nil
			}, nil
		})
}

func addrOrDash(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	return a.String()
}
