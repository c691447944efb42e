package parser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/cilium-go/cilium/pkg/hubble/filters"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// The scripts in testdata say what the agent knows (endpoints, pods,
// identities, Services, policies, the DNS names endpoints learned), feed the parser datapath events written
// as text and layer-7 proxies' records as the access log's JSON lines, and
// compare the flows it makes, as Hubble's JSON, with expected
// files; "flows filter.json" shows only those that Hubble's filters of the
// file let through. Update the expected files with
// go test -run TestScript -scripttest.update.
func TestScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	scripttest.Test(t, ctx, func(testing.TB, []string) *script.Engine {
		r := newRun()
		cmds := scripttest.DefaultCmds()
		for name, cmd := range r.commands() {
			cmds[name] = cmd
		}
		return &script.Engine{Cmds: cmds, Conds: scripttest.DefaultConds()}
	}, nil, "testdata/*.txtar")
}

// bootWall is the wall clock when the kernel's monotonic clock was zero:
// an event at time=1.5s is dated 1.5s after it.
var bootWall = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// run is one script's agent state, parser and flows.
type run struct {
	state  *scriptState
	parser *parser.Parser
	flows  []*flow.Flow
}

func newRun() *run {
	st := &scriptState{local: map[uint16]parser.Endpoint{}, byIP: map[netip.Addr]parser.Endpoint{},
		labels: map[identity.NumericIdentity][]string{}, services: map[uint16]parser.Service{},
		policies: map[uint32][]parser.Policy{}, netns: map[uint64]uint16{}, learned: scriptNames{}}
	clock := func() (time.Time, time.Duration, error) { return bootWall, 0, nil }
	return &run{state: st, parser: parser.New("node-1", st, clock).WithNames(st.learned)}
}

func (r *run) commands() map[string]script.Cmd {
	return map[string]script.Cmd{
		"endpoint": script.Command(script.CmdUsage{Summary: "a local endpoint", Args: "id identity namespace/pod address"},
			func(_ *script.State, args ...string) (script.WaitFunc, error) {
				return nil, r.state.addEndpoint(true, args)
			}),
		"pod": script.Command(script.CmdUsage{Summary: "another node's pod", Args: "identity namespace/pod address"},
			func(_ *script.State, args ...string) (script.WaitFunc, error) {
				return nil, r.state.addEndpoint(false, args)
			}),
		"identity": script.Command(script.CmdUsage{Summary: "an identity's labels", Args: "number source:key=value..."},
			func(_ *script.State, args ...string) (script.WaitFunc, error) { return nil, r.state.addIdentity(args) }),
		"service": script.Command(script.CmdUsage{Summary: "the Service of a reverse NAT index", Args: "index namespace/name"},
			func(_ *script.State, args ...string) (script.WaitFunc, error) { return nil, r.state.addService(args) }),
		"policy": script.Command(script.CmdUsage{Summary: "a policy that a policy entry's cookie names", Args: "cookie kind [namespace/]name"},
			func(_ *script.State, args ...string) (script.WaitFunc, error) { return nil, r.state.addPolicy(args) }),
		"learned": script.Command(script.CmdUsage{Summary: "the DNS names a local endpoint learned of an address (before the first event)",
			Args: "endpoint-id address name..."},
			func(_ *script.State, args ...string) (script.WaitFunc, error) { return nil, r.state.learned.add(args) }),
		"netns": script.Command(script.CmdUsage{Summary: "the network namespace cookie of a local endpoint", Args: "cookie endpoint-id"},
			func(_ *script.State, args ...string) (script.WaitFunc, error) { return nil, r.state.addNetNS(args) }),
		"event": script.Command(script.CmdUsage{Summary: "a datapath event, decoded into a flow",
			Args: "drop|trace|policy-verdict|trace-sock key=value..."},
			func(_ *script.State, args ...string) (script.WaitFunc, error) {
				// The error on stderr too, for "! event" to match.
				err := r.event(args)
				if err == nil {
					return nil, nil
				}
				return func(*script.State) (string, string, error) { return "", err.Error() + "\n", err }, nil
			}),
		"records": script.Command(script.CmdUsage{Summary: "a layer-7 proxy's records, decoded into flows",
			Args: "records.json (the access log's lines)"}, r.records),
		"flows": script.Command(script.CmdUsage{Summary: "the flows so far as Hubble's JSON, or those that a whitelist passes",
			Args: "[filters.json]"}, r.show),
	}
}

func (r *run) event(args []string) error {
	if len(args) == 0 {
		return script.ErrUsage
	}
	ev, err := parseEvent(args[0], args[1:])
	if err != nil {
		return err
	}
	f, err := r.parser.Decode(ev)
	if err != nil {
		return err
	}
	r.flows = append(r.flows, f)
	return nil
}

// records decodes a file of access log lines, as the proxy sends them.
func (r *run) records(s *script.State, args ...string) (script.WaitFunc, error) {
	if len(args) != 1 {
		return nil, script.ErrUsage
	}
	data, err := os.ReadFile(s.Path(args[0]))
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(data)) {
		var rec accesslog.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", args[0], err)
		}
		f, err := r.parser.DecodeRecord(rec)
		if err != nil {
			return nil, err
		}
		r.flows = append(r.flows, f)
	}
	return nil, nil
}

// uuidForm is a random (version 4) UUID, which the output leaves out.
var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func (r *run) show(s *script.State, args ...string) (script.WaitFunc, error) {
	set, err := filters.Compile(nil, nil)
	if len(args) == 1 {
		set, err = readFilters(s, args[0])
	} else if len(args) > 1 {
		return nil, script.ErrUsage
	}
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	for _, f := range r.flows {
		if !set.Pass(f) {
			continue
		}
		if !uuidForm.MatchString(f.GetUuid()) {
			return nil, fmt.Errorf("flow uuid %q is no version 4 UUID", f.GetUuid())
		}
		shown := proto.Clone(f).(*flow.Flow)
		shown.Uuid = ""
		b, err := protojson.Marshal(shown)
		if err != nil {
			return nil, err
		}
		// protojson varies its spaces on purpose; Indent makes them stable.
		var indented bytes.Buffer
		if err := json.Indent(&indented, compact(b), "", "  "); err != nil {
			return nil, err
		}
		out.Write(indented.Bytes())
		out.WriteString("\n")
	}
	return func(*script.State) (string, string, error) { return out.String(), "", nil }, nil
}

func compact(b []byte) []byte {
	var c bytes.Buffer
	_ = json.Compact(&c, b)
	return c.Bytes()
}

// readFilters reads a whitelist: a JSON array of FlowFilters, as Hubble's
// clients send them.
func readFilters(s *script.State, name string) (*filters.Set, error) {
	data, err := os.ReadFile(s.Path(name))
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var white []*flow.FlowFilter
	for _, raw := range raws {
		ff := &flow.FlowFilter{}
		if err := protojson.Unmarshal(raw, ff); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		white = append(white, ff)
	}
	return filters.Compile(white, nil)
}

// scriptState is what the script told of the agent.
type scriptState struct {
	local    map[uint16]parser.Endpoint
	byIP     map[netip.Addr]parser.Endpoint
	labels   map[identity.NumericIdentity][]string
	services map[uint16]parser.Service
	policies map[uint32][]parser.Policy
	netns    map[uint64]uint16
	learned  scriptNames
}

// scriptNames are the names endpoints learned, as the agent's FQDN cache
// gives them to the parser.
type scriptNames map[uint16]map[netip.Addr][]string

func (n scriptNames) NamesOf(ep uint16, a netip.Addr) []string { return n[ep][a] }

// add: "learned endpoint-id address name...".
func (n scriptNames) add(args []string) error {
	if len(args) < 3 {
		return script.ErrUsage
	}
	ep, err := strconv.ParseUint(args[0], 10, 16)
	if err != nil {
		return fmt.Errorf("endpoint id %q: %w", args[0], err)
	}
	addr, err := netip.ParseAddr(args[1])
	if err != nil {
		return err
	}
	if n[uint16(ep)] == nil {
		n[uint16(ep)] = map[netip.Addr][]string{}
	}
	n[uint16(ep)][addr] = append(n[uint16(ep)][addr], args[2:]...)
	return nil
}

func (s *scriptState) LocalEndpoint(id uint16) (parser.Endpoint, bool) {
	ep, ok := s.local[id]
	return ep, ok
}
func (s *scriptState) EndpointByIP(a netip.Addr) (parser.Endpoint, bool) {
	ep, ok := s.byIP[a]
	return ep, ok
}
func (s *scriptState) IdentityLabels(id identity.NumericIdentity) ([]string, bool) {
	ls, ok := s.labels[id]
	return ls, ok
}
func (s *scriptState) ServiceByRevNAT(i uint16) (parser.Service, bool) {
	svc, ok := s.services[i]
	return svc, ok
}
func (s *scriptState) PolicyOrigins(c uint32) []parser.Policy { return s.policies[c] }
func (s *scriptState) EndpointByNetNS(c uint64) (uint16, netip.Addr, bool) {
	id, ok := s.netns[c]
	if !ok {
		return 0, netip.Addr{}, false
	}
	for a, ep := range s.byIP {
		if ep.ID == id {
			return id, a, true
		}
	}
	return 0, netip.Addr{}, false
}

// addEndpoint: "endpoint id identity ns/pod addr" or "pod identity ns/pod addr".
func (s *scriptState) addEndpoint(local bool, args []string) error {
	var id uint64
	if local {
		if len(args) != 4 {
			return script.ErrUsage
		}
		var err error
		if id, err = strconv.ParseUint(args[0], 10, 16); err != nil {
			return fmt.Errorf("endpoint id %q: %w", args[0], err)
		}
		args = args[1:]
	}
	if len(args) != 3 {
		return script.ErrUsage
	}
	num, err := parseIdentity(args[0])
	if err != nil {
		return err
	}
	ns, pod, ok := strings.Cut(args[1], "/")
	if !ok {
		return fmt.Errorf("%q: want namespace/pod", args[1])
	}
	addr, err := netip.ParseAddr(args[2])
	if err != nil {
		return err
	}
	ep := parser.Endpoint{ID: uint16(id), Identity: num, Namespace: ns, PodName: pod}
	if local {
		s.local[ep.ID] = ep
	}
	s.byIP[addr] = ep
	return nil
}

func (s *scriptState) addIdentity(args []string) error {
	if len(args) < 2 {
		return script.ErrUsage
	}
	num, err := parseIdentity(args[0])
	if err != nil {
		return err
	}
	s.labels[num] = args[1:]
	return nil
}

func (s *scriptState) addService(args []string) error {
	if len(args) != 2 {
		return script.ErrUsage
	}
	i, err := strconv.ParseUint(args[0], 10, 16)
	if err != nil {
		return err
	}
	ns, name, ok := strings.Cut(args[1], "/")
	if !ok {
		return fmt.Errorf("%q: want namespace/name", args[1])
	}
	s.services[uint16(i)] = parser.Service{Namespace: ns, Name: name}
	return nil
}

func (s *scriptState) addPolicy(args []string) error {
	if len(args) != 3 {
		return script.ErrUsage
	}
	c, err := strconv.ParseUint(args[0], 10, 32)
	if err != nil {
		return err
	}
	p := parser.Policy{Kind: args[1], Name: args[2]}
	if ns, name, ok := strings.Cut(args[2], "/"); ok {
		p.Namespace, p.Name = ns, name
	}
	s.policies[uint32(c)] = append(s.policies[uint32(c)], p)
	return nil
}

func (s *scriptState) addNetNS(args []string) error {
	if len(args) != 2 {
		return script.ErrUsage
	}
	c, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		return err
	}
	id, err := strconv.ParseUint(args[1], 10, 16)
	if err != nil {
		return err
	}
	s.netns[c] = uint16(id)
	return nil
}

func parseIdentity(s string) (identity.NumericIdentity, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("identity %q: %w", s, err)
	}
	return identity.NumericIdentity(n), nil
}
