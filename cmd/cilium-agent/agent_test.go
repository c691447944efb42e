package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/cni"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/ipcache/ipcachetest"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	"github.com/cilium-go/cilium/pkg/loadbalancer/lbtest"
	"github.com/cilium-go/cilium/pkg/node"
	"github.com/cilium-go/cilium/pkg/node/nodetest"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
	"github.com/cilium-go/cilium/pkg/policy/policytest"
)

// anyDevice takes any pod device: there is no kernel to ask.
type anyDevice struct{}

func (anyDevice) CheckPodDevice(string, int) error { return nil }

// memDatapathCell stands in for the kernel in unprivileged tests: the
// endpoints in dp, the ipcache, the routes to other nodes, the policy
// map and the service maps in memory.
func memDatapathCell(dp endpoint.Datapath) cell.Cell {
	ipc, routes, pol, lb := ipcachetest.New(nil), nodetest.New(nil), policytest.New(), lbtest.New()
	return cell.Module("mem-datapath", "The datapath in memory",
		cell.Provide(
			func() endpoint.Datapath { return dp },
			func() server.PodDeviceChecker { return anyDevice{} },
			func() ipcache.MapSource { return func() ipcache.Map { return ipc } },
			func() node.Routes { return routes },
			func() policyagent.MapSource { return func() policyagent.Map { return pol } },
			func() loadbalancer.MapSource { return func() loadbalancer.Map { return lb } },
			func() loadbalancer.NodeAddresses { return nil },
		))
}

// startAgent runs the agent's cells, with the datapath in memory, on
// flags args.
func startAgent(t *testing.T, dp endpoint.Datapath, args ...string) (*hive.Hive, error) {
	t.Helper()
	return startHive(t, newHive(newLevel(), Infrastructure, ControlPlane, memDatapathCell(dp)), args)
}

func newLevel() *slog.LevelVar { return new(slog.LevelVar) }

func testLogger(t *testing.T) *slog.Logger { return hivetest.Logger(t) }

// startHive parses args as the agent's command line and starts h.
func startHive(t *testing.T, h *hive.Hive, args []string) (*hive.Hive, error) {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	h.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return h, h.Start(hivetest.Logger(t), ctx)
}

func stop(t *testing.T, h *hive.Hive) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Stop(hivetest.Logger(t), ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

func baseArgs(dir string) []string {
	return []string{"--state-dir=" + filepath.Join(dir, "state"), "--socket-path=" + filepath.Join(dir, "run", "cilium.sock"),
		"--bpf-root=" + filepath.Join(dir, "bpf"), "--prometheus-serve-addr=", "--ipam-pod-cidr=10.0.7.0/24"}
}

func TestBadFlagStopsStartupNamingIt(t *testing.T) {
	for _, tc := range []struct{ arg, flag string }{
		{"--ipam-pod-cidr=10.0.0.0/33", "--ipam-pod-cidr"},
		{"--ipam-pod-cidr=", "--ipam-pod-cidr"},
		{"--state-dir=relative", "--state-dir"},
		{"--socket-path=x.sock", "--socket-path"},
		{"--prometheus-serve-addr=nonsense", "--prometheus-serve-addr"},
	} {
		args := append(baseArgs(t.TempDir()), tc.arg)
		h, err := startAgent(t, endpointtest.NewDatapath(), args...)
		if err == nil {
			stop(t, h)
			t.Errorf("%s: agent started", tc.arg)
			continue
		}
		if !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: error %q does not name %s", tc.arg, err, tc.flag)
		}
	}
}

func TestAgentServesAPIAndRestoresAfterRestart(t *testing.T) {
	dir := t.TempDir()
	dp := endpointtest.NewDatapath()
	h, err := startAgent(t, dp, baseArgs(dir)...)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "cilium.sock")
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	c := client.New(sock)
	ctx := context.Background()
	// Modules report their health from their own jobs, soon after start.
	testenv.Eventually(t, 10*time.Second, func() error {
		hz, err := c.Healthz(ctx)
		if err != nil || !hz.OK {
			return fmt.Errorf("healthz: %+v %v", hz, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		levels := map[string]string{}
		for _, m := range hz.Modules {
			levels[m.Module] = m.Level
		}
		for _, m := range []string{"ipam", "endpoint-manager", "api-server"} {
			if levels[m] != "OK" {
				return fmt.Errorf("module %s: %q, want OK (all: %v)", m, levels[m], levels)
			}
		}
		return nil
	})
	alloc, err := c.AllocateIP(ctx, "c1")
	if err != nil || alloc.Address != "10.0.7.1" {
		t.Fatalf("allocate: %+v %v", alloc, err)
	}
	ep, err := c.PutEndpoint(ctx, models.EndpointRequest{ContainerID: "c1", IPv4: alloc.Address,
		MAC: "02:00:00:00:00:01", IfName: "eth0", HostIfName: "lxc1", HostIfindex: 5, NetNSPath: "/proc/1/ns/net"})
	if err != nil || ep.ID != 1 || ep.Identity != identity.Init {
		t.Fatalf("put endpoint: %+v %v", ep, err)
	}
	cfg, err := c.Config(ctx)
	if err != nil || cfg.Flags["ipam-pod-cidr"] != "10.0.7.0/24" {
		t.Fatalf("config: %+v %v", cfg, err)
	}
	stop(t, h)
	if _, err := c.Healthz(ctx); err == nil {
		t.Fatal("API answers after stop")
	}

	// A new agent on the same state dir has the endpoint and the address.
	dp2 := endpointtest.NewDatapath()
	h2, err := startAgent(t, dp2, baseArgs(dir)...)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, h2)
	got, err := c.GetEndpoint(ctx, "c1")
	if err != nil || got.IPv4 != "10.0.7.1" || dp2.Endpoint(1).HostDevice != "lxc1" {
		t.Fatalf("after restart: %+v %v, datapath %+v", got, err, dp2.Endpoint(1))
	}
	next, err := c.AllocateIP(ctx, "c2")
	if err != nil || next.Address == alloc.Address {
		t.Fatalf("address after restart: %+v %v", next, err)
	}
	if err := c.DeleteEndpoint(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteEndpoint(ctx, "c1"); !client.IsNotFound(err) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestCommandRejectsBadFlag runs the command line as main does.
func TestCommandRejectsBadFlag(t *testing.T) {
	cmd := newCommand(Infrastructure, ControlPlane, memDatapathCell(endpointtest.NewDatapath()))
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(baseArgs(t.TempDir()), "--ipam-pod-cidr=10.0.0.0/8x"))
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `--ipam-pod-cidr "10.0.0.0/8x"`) || !strings.Contains(out.String(), "--ipam-pod-cidr") {
		t.Fatalf("error %v, output %q", err, out.String())
	}
	cmd.SetArgs([]string{"--no-such-flag"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("unknown flag: %v", err)
	}
}

// The CNI configuration appears only once the agent serves CNI, and
// names the agent's socket.
func TestAgentWritesCNIConfWhenReady(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "net.d", "05-cilium.conflist")
	h, err := startAgent(t, endpointtest.NewDatapath(),
		append(baseArgs(dir), "--write-cni-conf-when-ready="+conf)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, h) })
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	var plugin cni.NetConf
	if len(list.Plugins) != 1 || json.Unmarshal(list.Plugins[0].Bytes, &plugin) != nil ||
		plugin.Type != "cilium-cni" || plugin.SocketPath != filepath.Join(dir, "run", "cilium.sock") {
		t.Fatalf("configuration %s", b)
	}
	if _, err := client.New(plugin.SocketPath).Healthz(context.Background()); err != nil {
		t.Fatalf("the socket the configuration names does not answer: %v", err)
	}

	_, err = startAgent(t, endpointtest.NewDatapath(),
		append(baseArgs(t.TempDir()), "--write-cni-conf-when-ready=net.d/x.conflist")...)
	if err == nil || !strings.Contains(err.Error(), "--write-cni-conf-when-ready") {
		t.Fatalf("relative path: %v, want an error naming the flag", err)
	}
}
