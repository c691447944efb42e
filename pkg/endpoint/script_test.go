package endpoint_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/paths"
)

// The scripts in testdata create and delete endpoints through the
// manager, and put what an earlier agent left on disk and in the datapath
// before the start; they read the endpoints table and the datapath
// (in memory) out. The flags of a script's "#!" line are the agent's.
func TestScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	scripttest.Test(t, ctx, func(t testing.TB, args []string) *script.Engine {
		dp := endpointtest.NewDatapath()
		var mgr *endpoint.Manager
		var cfg paths.Config
		h := health.NewHive(job.Cell, statedb.Cell, health.Cell, paths.Cell, ipam.Cell, endpoint.Cell,
			cell.Provide(endpoint.NewInitIdentityAllocator, func() endpoint.Datapath { return dp }, prometheus.NewRegistry),
			cell.Invoke(func(m *endpoint.Manager, c paths.Config) { mgr, cfg = m, c }))
		fs := pflag.NewFlagSet("", pflag.ContinueOnError)
		h.RegisterFlags(fs)
		if err := fs.Parse(append([]string{"--state-dir=" + t.TempDir()}, args...)); err != nil {
			t.Fatal(err)
		}
		log := hivetest.Logger(t)
		cmds, err := h.ScriptCommands(log)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(cmds, scripttest.DefaultCmds())
		maps.Copy(cmds, endpointCmds(func() *endpoint.Manager { return mgr }, dp, func() string { return endpoint.StateDir(cfg) }))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = h.Stop(log, ctx) // stopping a hive the script never started fails, harmlessly
		})
		return &script.Engine{Cmds: cmds, Conds: scripttest.DefaultConds(), RetryInterval: 10 * time.Millisecond,
			MaxRetryInterval: 200 * time.Millisecond}
	}, nil, "testdata/*.txtar")
}

func endpointCmds(mgr func() *endpoint.Manager, dp *endpointtest.Datapath, stateDir func() string) map[string]script.Cmd {
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
			a := ip.As4()
			_, _, err = mgr().Create(s.Context(), endpoint.Spec{ContainerID: args[0], PodNamespace: ns, PodName: pod,
				IPv4: ip, MAC: fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3]), IfName: "eth0",
				HostIfName: "lxc" + strconv.Itoa(int(a[3])), HostIfindex: 100 + int(a[3]), NetNSPath: "/proc/1/ns/net"})
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
		"endpoint/datapath": script.Command(script.CmdUsage{Summary: "the endpoints the datapath holds: id, ipv4, identity, device"},
			func(*script.State, ...string) (script.WaitFunc, error) {
				var b strings.Builder
				for _, ep := range dp.All() {
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
			dp.Put(spec.Endpoint{ID: uint16(id), IPv4: ip})
			return nil, nil
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
