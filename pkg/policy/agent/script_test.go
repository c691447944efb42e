package agent_test

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/k8s/agent/agenttest"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/policy"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
	"github.com/cilium-go/cilium/pkg/policy/policytest"
)

// scriptMap is the policy map a script runs against: what the
// reconciler writes, and each endpoint's entries read back.
type scriptMap interface {
	policyagent.Map
	entries(ep uint16) ([]spec.PolicyEntry, error)
}

type fakeMap struct{ *policytest.Map }

func (m fakeMap) entries(ep uint16) ([]spec.PolicyEntry, error) { return m.Policy(ep), nil }

// The scripts in testdata put NetworkPolicies, Cilium's policies,
// identities and local endpoints in, and read the endpoint-policies and
// policy-entries tables and the endpoints' policy maps out. TestScript
// runs them against maps in memory, TestPrivilegedScript against a real
// datapath's maps, which the reconciler writes as in the agent: the same
// scripts, the same output.
func TestScript(t *testing.T) {
	runScripts(t, func(testing.TB) scriptMap { return fakeMap{policytest.New()} })
}

func TestPrivilegedScript(t *testing.T) {
	testenv.Privileged(t)
	runScripts(t, func(t testing.TB) scriptMap {
		return realMap{dptest.StartNode(t, testenv.NewNetNS(t)).Maps()}
	})
}

func runScripts(t *testing.T, newMap func(testing.TB) scriptMap) {
	testenv.RunHiveScripts(t, func(t testing.TB, args []string) (*hive.Hive, map[string]script.Cmd) {
		m := newMap(t)
		clients, k8sCells := agenttest.Cells("node-a", nil)
		var cookies *policy.Cookies
		var (
			db       *statedb.DB
			prefixes statedb.Table[*ipcache.PolicyPrefixRow]
		)
		h := health.NewHive(
			job.Cell, statedb.Cell, health.Cell,
			policyagent.Cell, policyagent.EngineCell, k8sCells,
			cell.Provide(
				endpoint.NewTable, statedb.RWTable[*endpoint.EndpointRow].ToTable,
				func() policyagent.MapSource { return func() policyagent.Map { return m } },
			),
			cell.Invoke(func(c *policy.Cookies, d *statedb.DB, t statedb.Table[*ipcache.PolicyPrefixRow]) {
				cookies, db, prefixes = c, d, t
			}),
		)
		// "#! --flag=value" lines set the policy cells' flags.
		for _, a := range args {
			k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			h.Viper().Set(k, v)
		}
		cmds := k8stest.ScriptCmds(k8stest.Trackers{
			Kube: clients.Kube.(*kubefake.Clientset).Tracker(), Cilium: clients.Cilium.(*client.Fake).Tracker})
		cmds["policy/map"] = script.Command(script.CmdUsage{
			Summary: "the endpoints' policy maps: endpoint, direction, identity, protocol/ports, verdict, the rules behind it",
			Args:    "endpoint-id...",
		}, func(_ *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) == 0 {
				return nil, script.ErrUsage
			}
			var lines []string
			for _, arg := range args {
				id, err := strconv.ParseUint(arg, 10, 16)
				if err != nil {
					return nil, err
				}
				entries, err := m.entries(uint16(id))
				if err != nil {
					return nil, err
				}
				for _, e := range mergeBlocks(effective(entries)) {
					lines = append(lines, entryLine(uint16(id), e, cookies))
				}
			}
			return lines2out(lines), nil
		})
		cmds["policy/prefixes"] = script.Command(script.CmdUsage{
			Summary: "the prefixes that rules name, with the CIDR identities the engine gave them for the ipcache",
		}, func(*script.State, ...string) (script.WaitFunc, error) {
			var lines []string
			for p := range prefixes.All(db.ReadTxn()) {
				in := ""
				if p.InCluster {
					in = " in-cluster"
				}
				lines = append(lines, fmt.Sprintf("%s %d%s", p.Prefix, p.Identity, in))
			}
			return lines2out(lines), nil
		})
		cmds["policy/events"] = script.Command(script.CmdUsage{
			Summary: "the warnings recorded on objects: type, reason, kind namespace/name, message",
		}, func(s *script.State, _ ...string) (script.WaitFunc, error) {
			evs, err := clients.Kube.CoreV1().Events("").List(s.Context(), metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var lines []string
			for _, e := range evs.Items {
				o := e.InvolvedObject
				lines = append(lines, fmt.Sprintf("%s %s %s %s/%s: %s", e.Type, e.Reason, o.Kind, o.Namespace, o.Name, e.Message))
			}
			slices.Sort(lines)
			return lines2out(lines), nil
		})
		return h, cmds
	})
}

func lines2out(lines []string) script.WaitFunc {
	return func(*script.State) (string, string, error) {
		if len(lines) == 0 {
			return "", "", nil
		}
		return strings.Join(lines, "\n") + "\n", "", nil
	}
}

// effective is what the datapath enforces of entries: an allow that a
// deny of the same direction and identity covers is that deny, as the
// datapath's map holds it (a map in memory holds both).
func effective(entries []spec.PolicyEntry) []spec.PolicyEntry {
	var out []spec.PolicyEntry
	for _, e := range entries {
		if !e.Deny {
			for _, d := range entries {
				if d.Deny && covers(d, e) {
					e.Deny, e.Cookie = true, d.Cookie
					break
				}
			}
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// covers reports whether deny d matches every packet that e does.
func covers(d, e spec.PolicyEntry) bool {
	switch {
	case d.Direction != e.Direction || d.Identity != e.Identity:
		return false
	case d.Protocol == 0:
		return true
	case d.Protocol != e.Protocol:
		return false
	case d.Port == 0:
		return true
	}
	return e.Port != 0 && e.Port >= d.Port && max(e.Port, e.EndPort) <= max(d.Port, d.EndPort)
}

// mergeBlocks joins entries that differ only in adjacent port ranges:
// the datapath stores a range as aligned blocks, one key each, and reads
// them back so; joined, a real map and one in memory print the same.
func mergeBlocks(entries []spec.PolicyEntry) []spec.PolicyEntry {
	es := slices.Clone(entries)
	slices.SortFunc(es, func(a, b spec.PolicyEntry) int {
		return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Identity, b.Identity),
			cmp.Compare(a.Protocol, b.Protocol), spec.CompareBools(a.Deny, b.Deny), cmp.Compare(a.Port, b.Port))
	})
	var out []spec.PolicyEntry
	for _, e := range es {
		if n := len(out); n > 0 && joinable(out[n-1], e) {
			out[n-1].EndPort = max(e.Port, e.EndPort)
			continue
		}
		out = append(out, e)
	}
	return out
}

func joinable(a, b spec.PolicyEntry) bool {
	end := max(a.Port, a.EndPort)
	return a.Port != 0 && b.Port != 0 && end < 0xffff && end+1 == b.Port &&
		a.Direction == b.Direction && a.Identity == b.Identity && a.Protocol == b.Protocol &&
		a.Deny == b.Deny && a.ProxyPort == b.ProxyPort && a.Cookie == b.Cookie
}

// entryLine prints an entry as "endpoint direction identity
// protocol/ports verdict origins".
func entryLine(ep uint16, e spec.PolicyEntry, cookies *policy.Cookies) string {
	ports := protoName(e.Protocol)
	switch {
	case e.EndPort > e.Port:
		ports += fmt.Sprintf("/%d-%d", e.Port, e.EndPort)
	case e.Port != 0:
		ports += fmt.Sprintf("/%d", e.Port)
	}
	verdict := "allow"
	if e.Deny {
		verdict = "deny"
	}
	var origins []string
	for _, o := range cookies.Origins(e.Cookie) {
		origins = append(origins, o.String())
	}
	return fmt.Sprintf("%d %s %d %s %s %s", ep, e.Direction, e.Identity, ports, verdict, strings.Join(origins, ","))
}

func protoName(p uint8) string {
	switch p {
	case 0:
		return "any"
	case spec.ProtoTCP:
		return "TCP"
	case spec.ProtoUDP:
		return "UDP"
	case spec.ProtoSCTP:
		return "SCTP"
	case spec.ProtoICMP:
		return "ICMP"
	}
	return strconv.Itoa(int(p))
}

// realMap is a datapath node's maps, as the agent's policy reconciler
// writes them.
type realMap struct{ *datapath.Maps }

func (m realMap) entries(ep uint16) ([]spec.PolicyEntry, error) { return m.PolicyEntries(ep) }
