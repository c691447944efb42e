package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	k8stables "github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
	"github.com/cilium-go/cilium/pkg/loadbalancer/lbtest"
)

// The scripts in testdata put Services and EndpointSlices in and read
// the services, frontends and backends tables and the service maps out.
// TestScript runs them against maps in memory, TestPrivilegedScript
// against a real datapath's: the same scripts, the same output.
func TestScript(t *testing.T) {
	runScripts(t, func(testing.TB) loadbalancer.Map { return lbtest.New() })
}

func TestPrivilegedScript(t *testing.T) {
	testenv.Privileged(t)
	runScripts(t, func(t testing.TB) loadbalancer.Map {
		return dptest.StartNode(t, testenv.NewNetNS(t)).Maps()
	})
}

// nodeIP is node-a's address, where its NodePorts listen.
var nodeIP = netip.MustParseAddr("192.168.77.1")

func runScripts(t *testing.T, newMap func(testing.TB) loadbalancer.Map) {
	testenv.RunHiveScripts(t, func(t testing.TB, args []string) (*hive.Hive, map[string]script.Cmd) {
		m := newMap(t)
		kube := kubefake.NewClientset()
		socks := &fakeSockets{}
		// healthCheckNodePorts listen in memory, not on the machine.
		hcNet := lbtest.NewNet()
		cells := []cell.Cell{
			job.Cell, statedb.Cell, health.Cell,
			kubeCells(kube), lbk8s.Cell, loadbalancer.Cell,
			cell.Provide(
				func() loadbalancer.MapSource { return func() loadbalancer.Map { return m } },
				func() loadbalancer.NodeAddresses { return loadbalancer.NodeAddresses{nodeIP} },
				func() loadbalancer.Sockets { return socks },
				func() loadbalancer.ListenFunc { return hcNet.Listen },
			),
		}
		cmds := k8stest.ScriptCmds(k8stest.Trackers{Kube: kube.Tracker()})
		cmds["lb/maps"] = script.Command(script.CmdUsage{
			Summary: "the datapath's service maps: frontend, flags, affinity, reverse NAT, source ranges and backends by slot",
		}, func(*script.State, ...string) (script.WaitFunc, error) {
			lines, err := dumpMaps(m)
			if err != nil {
				return nil, err
			}
			return func(*script.State) (string, string, error) {
				if len(lines) == 0 {
					return "", "", nil
				}
				return strings.Join(lines, "\n") + "\n", "", nil
			}, nil
		})
		cmds["lb/terminated"] = script.Command(script.CmdUsage{
			Summary: "the UDP backends whose connected sockets were ended, in order",
		}, func(*script.State, ...string) (script.WaitFunc, error) {
			lines := socks.list()
			return func(*script.State) (string, string, error) {
				if len(lines) == 0 {
					return "", "", nil
				}
				return strings.Join(lines, "\n") + "\n", "", nil
			}, nil
		})
		cmds["lb/events"] = script.Command(script.CmdUsage{
			Summary: "the warnings recorded on objects: type, reason, kind namespace/name, message",
		}, func(s *script.State, _ ...string) (script.WaitFunc, error) {
			evs, err := kube.CoreV1().Events("").List(s.Context(), metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var lines []string
			for _, e := range evs.Items {
				o := e.InvolvedObject
				lines = append(lines, fmt.Sprintf("%s %s %s %s/%s: %s", e.Type, e.Reason, o.Kind, o.Namespace, o.Name, e.Message))
			}
			slices.Sort(lines)
			return func(*script.State) (string, string, error) {
				if len(lines) == 0 {
					return "", "", nil
				}
				return strings.Join(lines, "\n") + "\n", "", nil
			}, nil
		})
		cmds["lb/put-backend"] = script.Command(script.CmdUsage{
			Summary: "write a backend into the maps behind the reconciler's back, as an earlier agent did",
			Args:    "id address:port/protocol",
		}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 2 {
				return nil, script.ErrUsage
			}
			id, err := strconv.ParseUint(args[0], 10, 32)
			if err != nil {
				return nil, err
			}
			a, err := parseAddr(args[1])
			if err != nil {
				return nil, err
			}
			return nil, m.UpsertBackend(spec.Backend{ID: spec.BackendID(id), Address: a.Address, Port: a.Port, Protocol: a.Protocol})
		})
		cmds["lb/put-service"] = script.Command(script.CmdUsage{
			Summary: "write a frontend and its reverse translation into the maps behind the reconciler's back",
			Args:    "address:port/protocol rev-nat-index backend-id...",
		}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) < 2 {
				return nil, script.ErrUsage
			}
			a, err := parseAddr(args[0])
			if err != nil {
				return nil, err
			}
			idx, err := strconv.ParseUint(args[1], 10, 16)
			if err != nil {
				return nil, err
			}
			svc := spec.Service{Frontend: spec.Frontend{Address: a.Address, Port: a.Port, Protocol: a.Protocol}, RevNATIndex: uint16(idx)}
			for _, arg := range args[2:] {
				id, err := strconv.ParseUint(arg, 10, 32)
				if err != nil {
					return nil, err
				}
				svc.Backends = append(svc.Backends, spec.BackendID(id))
			}
			if err := m.UpsertService(svc); err != nil {
				return nil, err
			}
			return nil, m.UpsertRevNAT(spec.RevNAT{Index: uint16(idx), Address: a.Address, Port: a.Port})
		})
		cmds["lb/put-source-range"] = script.Command(script.CmdUsage{
			Summary: "write a source range into the maps behind the reconciler's back, as an earlier agent did",
			Args:    "rev-nat-index prefix",
		}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 2 {
				return nil, script.ErrUsage
			}
			idx, err := strconv.ParseUint(args[0], 10, 16)
			if err != nil {
				return nil, err
			}
			p, err := netip.ParsePrefix(args[1])
			if err != nil {
				return nil, err
			}
			return nil, m.UpsertSourceRange(spec.SourceRange{RevNATIndex: uint16(idx), Prefix: p})
		})
		cmds["lb/healthcheck"] = script.Command(script.CmdUsage{
			Summary: "ask a healthCheckNodePort: status, endpoint weight and body, or refused",
			Args:    "address:port",
		}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			out, err := healthCheck(hcNet, args[0])
			return func(*script.State) (string, string, error) { return out, "", err }, nil
		})
		h := health.NewHive(cells...)
		// "#! --flag=value" lines set the load balancer's flags.
		for _, a := range args {
			k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			h.Viper().Set(k, v)
		}
		return h, cmds
	})
}

// kubeCells fill the Kubernetes tables from kube as node-a's agent does;
// lbk8s.Cell gives the load balancer its intake over them, and its
// events.
func kubeCells(kube kubernetes.Interface) cell.Cell {
	return cell.Group(
		k8stables.Cell,
		cell.Provide(func() *k8stables.Clients { return &k8stables.Clients{Kube: kube, NodeName: "node-a"} }),
	)
}

// dumpMaps prints each frontend with its backends by address, so that
// the output says what a client gets whatever the ids are; a slot naming
// no backend, or a reverse translation that names another frontend,
// shows as an error in the line.
// maglevShares says how many slots of s's Maglev table each of its
// backends has, in slot order ("84/84/83"), or what is wrong with the
// table.
func maglevShares(m loadbalancer.Map, s spec.Service, backends map[spec.BackendID]spec.Backend) (string, error) {
	reader, ok := m.(interface {
		MaglevTable(uint16) ([]spec.BackendID, bool, error)
	})
	if !ok {
		return "", fmt.Errorf("%T cannot read Maglev tables", m)
	}
	table, ok, err := reader.MaglevTable(s.RevNATIndex)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "MISSING", nil
	case len(table) != m.MaglevTableSize():
		return fmt.Sprintf("BAD-SIZE(%d)", len(table)), nil
	}
	count := map[spec.BackendID]int{}
	for _, id := range table {
		count[id]++
	}
	var out []string
	for _, id := range s.Backends {
		out = append(out, strconv.Itoa(count[id]))
		delete(count, id)
	}
	for id := range count {
		out = append(out, fmt.Sprintf("NOT-A-SLOT(%s)", backendString(backends[id])))
	}
	return strings.Join(out, "/"), nil
}

func dumpMaps(m loadbalancer.Map) ([]string, error) {
	svcs, err := m.Services()
	if err != nil {
		return nil, err
	}
	backends, err := m.Backends()
	if err != nil {
		return nil, err
	}
	revs, err := m.RevNATs()
	if err != nil {
		return nil, err
	}
	held, err := m.SourceRanges()
	if err != nil {
		return nil, err
	}
	ranges := map[uint16][]string{}
	for _, r := range held {
		ranges[r.RevNATIndex] = append(ranges[r.RevNATIndex], r.Prefix.String())
	}
	fenced, tabled := map[uint16]bool{}, map[uint16]bool{}
	used := map[spec.BackendID]bool{}
	var lines []string
	for _, s := range svcs {
		var bs []string
		for _, id := range s.Backends {
			used[id] = true
			b, ok := backends[id]
			if !ok {
				bs = append(bs, fmt.Sprintf("MISSING(%d)", id))
				continue
			}
			bs = append(bs, backendString(b))
		}
		line := s.Frontend.String()
		if fl := strings.Join((s.Flags &^ spec.LBAffinity).Names(), ","); fl != "" {
			line += " " + fl
		}
		if s.Flags&spec.LBAffinity != 0 {
			line += fmt.Sprintf(" affinity=%ds", s.AffinityTimeout)
		}
		if r, ok := revs[s.RevNATIndex]; !ok || r.Address != s.Frontend.Address || r.Port != s.Frontend.Port {
			line += fmt.Sprintf(" BAD-REVNAT(%d)", s.RevNATIndex)
		}
		if s.Flags&spec.LBSourceRange != 0 {
			fenced[s.RevNATIndex] = true
			slices.Sort(ranges[s.RevNATIndex])
			line += " from=" + strings.Join(ranges[s.RevNATIndex], ",")
		}
		if s.Flags&spec.LBMaglev != 0 && len(s.Backends) > 0 {
			tabled[s.RevNATIndex] = true
			shares, err := maglevShares(m, s, backends)
			if err != nil {
				return nil, err
			}
			line += " maglev=" + shares
		}
		lines = append(lines, line+" -> "+strings.Join(bs, " "))
	}
	// Maglev tables of no frontend that has one are stale.
	tables, err := m.MaglevIndexes()
	if err != nil {
		return nil, err
	}
	for _, idx := range tables {
		if !tabled[idx] {
			lines = append(lines, fmt.Sprintf("STALE maglev table of reverse NAT %d", idx))
		}
	}
	// Source ranges of no fenced frontend are stale.
	for _, r := range held {
		if !fenced[r.RevNATIndex] {
			lines = append(lines, fmt.Sprintf("STALE source range %s of reverse NAT %d", r.Prefix, r.RevNATIndex))
		}
	}
	// Backends that no slot names are there for the connections they have.
	for id, b := range backends {
		if !used[id] {
			lines = append(lines, "backend "+backendString(b))
		}
	}
	slices.Sort(lines)
	return lines, nil
}

// fakeSockets records which backends' UDP sockets the reconciler ended.
type fakeSockets struct {
	mu         sync.Mutex
	terminated []string
}

func (f *fakeSockets) TerminateUDP(b netip.AddrPort) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminated = append(f.terminated, b.String())
	return nil
}

func (f *fakeSockets) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.terminated)
}

// parseAddr reads "address:port/protocol".
func parseAddr(s string) (loadbalancer.Addr, error) {
	ap, proto, ok := strings.Cut(s, "/")
	a, err := netip.ParseAddrPort(ap)
	p, known := map[string]uint8{"TCP": spec.ProtoTCP, "UDP": spec.ProtoUDP, "SCTP": spec.ProtoSCTP}[proto]
	if !ok || err != nil || !known {
		return loadbalancer.Addr{}, fmt.Errorf("%q: want address:port/TCP|UDP|SCTP", s)
	}
	return loadbalancer.Addr{Address: a.Addr(), Port: a.Port(), Protocol: p}, nil
}

func backendString(b spec.Backend) string {
	s := loadbalancer.Addr{Address: b.Address, Port: b.Port, Protocol: b.Protocol}.String()
	if b.Terminating {
		s += "(terminating)"
	}
	return s
}

// healthCheck asks the healthCheckNodePort at addr of the network n.
func healthCheck(n *lbtest.Net, addr string) (string, error) {
	a, err := netip.ParseAddrPort(addr)
	if err != nil {
		return "", err
	}
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return n.Dial(ctx, a) }}}
	resp, err := c.Get("http://" + addr + "/")
	if errors.Is(err, lbtest.ErrRefused) {
		return "refused\n", nil
	}
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d weight=%s %s\n%s\n", resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight"),
		resp.Header.Get("Content-Type"), body), nil
}
