package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/identity"
)

// bpfJSON runs a bpf command with -o json on the pins under root and
// decodes its answer strictly into v.
func bpfJSON(t *testing.T, root string, v any, args ...string) {
	t.Helper()
	decode(t, filepath.Join(t.TempDir(), "no-agent.sock"), v, append(args, "--bpf-root", root)...)
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// TestPrivilegedPinnedMaps writes entries into real pinned maps, closes
// them as a stopped agent would, and reads them back with cilium-dbg.
func TestPrivilegedPinnedMaps(t *testing.T) {
	testenv.Privileged(t) // mounts a bpffs and creates BPF maps
	root := testnode.TempBPFFS(t)
	writePins(t, filepath.Join(root, "maps"))
	for _, tc := range []struct {
		args []string
		got  any // a pointer to decode into
		want any
	}{
		{[]string{"bpf", "ipcache", "list"}, &[]models.IPCacheEntry{}, []models.IPCacheEntry{
			{Prefix: "10.10.1.12/32", Identity: 1012},
			{Prefix: "10.10.2.0/24", Identity: 1020, TunnelEndpoint: "192.168.50.2"},
			{Prefix: "10.10.2.21/32", Identity: 1021, TunnelEndpoint: "192.168.50.2"},
			{Prefix: "192.168.50.2/32", Identity: 6},
		}},
		{[]string{"bpf", "endpoint", "list"}, &[]bpfEndpoint{}, []bpfEndpoint{
			{ID: 11, IPv4: "10.10.1.11", Identity: 1011, MAC: "02:00:00:00:01:11", HostMAC: "02:00:00:00:02:11", HostIfindex: 31},
			{ID: 12, IPv4: "10.10.1.12", Identity: 1012, MAC: "02:00:00:00:01:12", HostMAC: "02:00:00:00:02:12",
				HostIfindex: 33, PolicyIngress: true},
		}},
		{[]string{"bpf", "policy", "list", "12"}, &[]bpfPolicyEntry{}, []bpfPolicyEntry{
			{Direction: "ingress", Identity: 0, Protocol: 17, Verdict: "deny"},
			{Direction: "ingress", Identity: 1021, Protocol: 6, Port: 8080, Verdict: "allow"},
			{Direction: "egress", Identity: 1021, Protocol: 6, Port: 9000, EndPort: 9003, Verdict: "allow"},
		}},
		{[]string{"bpf", "policy", "get", "11"}, &[]bpfPolicyEntry{}, []bpfPolicyEntry{}},
		{[]string{"bpf", "ct", "list"}, &[]bpfConnection{}, []bpfConnection{}},
		// Cilium's layout: each slot of a frontend to what it holds.
		{[]string{"bpf", "lb", "list"}, &map[string][]string{}, map[string][]string{
			"10.96.0.10:53/UDP (0)":      {"0.0.0.0:0 (3) (0) [ClusterIP, sessionAffinity (60s)]"},
			"10.96.0.10:53/UDP (1)":      {"10.10.1.11:5353/UDP (3) (1)"},
			"10.96.0.10:53/UDP (2)":      {"10.10.2.21:5353/UDP (3) (2) [terminating]"},
			"192.168.50.1:30053/UDP (0)": {"0.0.0.0:0 (4) (0) [NodePort]"},
			"198.51.100.5:80/TCP (0)":    {"0.0.0.0:0 (7) (0) [LoadBalancer, maglev]"},
			"198.51.100.5:80/TCP (1)":    {"10.10.1.11:80/TCP (7) (1)"},
			"198.51.100.5:80/TCP (2)":    {"10.10.2.21:80/TCP (7) (2)"},
		}},
		{[]string{"bpf", "lb", "maglev", "list"}, &map[string]map[string]int{}, map[string]map[string]int{
			"7": {"5": 126, "6": 125},
		}},
		{[]string{"bpf", "metrics", "list"}, &[]bpfCounter{}, []bpfCounter{}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			bpfJSON(t, root, tc.got, tc.args...)
			if !equalJSON(tc.got, tc.want) {
				t.Errorf("got %+v\nwant %+v", tc.got, tc.want)
			}
		})
	}

	out, err := run(t, filepath.Join(t.TempDir(), "none.sock"), "bpf", "ipcache", "list", "--bpf-root", root)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := [][]string{
		{"PREFIX", "IDENTITY", "TUNNEL", "ENDPOINT", "CIDR", "IDENTITY"},
		{"10.10.1.12/32", "1012", "-", "-"},
		{"10.10.2.0/24", "1020", "192.168.50.2", "-"},
		{"10.10.2.21/32", "1021", "192.168.50.2", "-"},
		{"192.168.50.2/32", "6", "-", "-"},
	}
	if !equalRows(lines(out), wantRows) {
		t.Errorf("bpf ipcache list table:\n%s", out)
	}

	// A directory on a bpffs without pins is an error, and stays empty.
	empty := filepath.Join(root, "elsewhere")
	if err := os.MkdirAll(filepath.Join(empty, "maps"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "", "bpf", "endpoint", "list", "--bpf-root", empty); err == nil ||
		!strings.Contains(err.Error(), "map not pinned") {
		t.Errorf("bpf endpoint list without pins: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(empty, "maps")); len(left) != 0 {
		t.Errorf("cilium-dbg created pins: %v", left)
	}
}

// writePins creates the node's maps in dir as the agent does, fills them
// and closes them again: the pins stay, as after the agent stopped.
func writePins(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := datapath.OpenMaps(dir, datapath.WithLBMapMax(4096))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// A service with a live and a terminating backend, and a NodePort
	// without backends; the maps are smaller than compiled, as with
	// --bpf-lb-map-max, and still open for cilium-dbg.
	dns := spec.Frontend{Address: netip.MustParseAddr("10.96.0.10"), Port: 53, Protocol: spec.ProtoUDP}
	np := spec.Frontend{Address: netip.MustParseAddr("192.168.50.1"), Port: 30053, Protocol: spec.ProtoUDP}
	lb := spec.Frontend{Address: netip.MustParseAddr("198.51.100.5"), Port: 80, Protocol: spec.ProtoTCP}
	maglev := make([]spec.BackendID, m.MaglevTableSize())
	for i := range maglev {
		maglev[i] = spec.BackendID(5 + i%2)
	}
	for _, err := range []error{
		m.UpsertBackend(spec.Backend{ID: 1, Address: netip.MustParseAddr("10.10.1.11"), Port: 5353, Protocol: spec.ProtoUDP}),
		m.UpsertBackend(spec.Backend{ID: 2, Address: netip.MustParseAddr("10.10.2.21"), Port: 5353, Protocol: spec.ProtoUDP, Terminating: true}),
		m.UpsertService(spec.Service{Frontend: dns, Backends: []spec.BackendID{1, 2}, RevNATIndex: 3, Flags: spec.LBAffinity, AffinityTimeout: 60}),
		m.UpsertRevNAT(spec.RevNAT{Index: 3, Address: dns.Address, Port: 53}),
		m.UpsertService(spec.Service{Frontend: np, RevNATIndex: 4, Flags: spec.LBNodePort}),
		m.UpsertRevNAT(spec.RevNAT{Index: 4, Address: np.Address, Port: 30053}),
		// A LoadBalancer address with a Maglev table of the compiled
		// size, backends 5 and 6 taking turns.
		m.UpsertBackend(spec.Backend{ID: 5, Address: netip.MustParseAddr("10.10.1.11"), Port: 80, Protocol: spec.ProtoTCP}),
		m.UpsertBackend(spec.Backend{ID: 6, Address: netip.MustParseAddr("10.10.2.21"), Port: 80, Protocol: spec.ProtoTCP}),
		m.UpsertService(spec.Service{Frontend: lb, Backends: []spec.BackendID{5, 6}, RevNATIndex: 7,
			Flags: spec.LBLoadBalancer | spec.LBMaglev, Maglev: maglev}),
		m.UpsertRevNAT(spec.RevNAT{Index: 7, Address: lb.Address, Port: 80}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []datapath.EndpointEntry{
		{ID: 12, Identity: 1012, IPv4: netip.MustParseAddr("10.10.1.12"), MAC: mustMAC("02:00:00:00:01:12"),
			HostMAC: mustMAC("02:00:00:00:02:12"), HostIfindex: 33, PolicyIngress: true},
		{ID: 11, Identity: 1011, IPv4: netip.MustParseAddr("10.10.1.11"), MAC: mustMAC("02:00:00:00:01:11"),
			HostMAC: mustMAC("02:00:00:00:02:11"), HostIfindex: 31},
	} {
		if err := m.UpsertEndpoint(e); err != nil {
			t.Fatal(err)
		}
	}
	tunnel := netip.MustParseAddr("192.168.50.2")
	err = m.SyncIPCache(map[netip.Prefix]spec.IPCacheEntry{
		netip.MustParsePrefix("10.10.1.12/32"):   {Identity: 1012},
		netip.MustParsePrefix("10.10.2.21/32"):   {Identity: 1021, TunnelEndpoint: tunnel},
		netip.MustParsePrefix("192.168.50.2/32"): {Identity: identity.RemoteNode},
		netip.MustParsePrefix("10.10.2.0/24"):    {Identity: 1020, TunnelEndpoint: tunnel},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = m.SetPolicy(12, []spec.PolicyEntry{
		{Direction: spec.Ingress, Identity: 1021, Protocol: 6, Port: 8080},
		{Direction: spec.Ingress, Identity: identity.Unknown, Protocol: 17, Deny: true},
		{Direction: spec.Egress, Identity: 1021, Protocol: 6, Port: 9000, EndPort: 9003},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// syncBuffer is written by the monitor and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPrivilegedLiveDatapath runs a two-node datapath in namespaces,
// sends allowed and denied traffic and checks what cilium-dbg shows of
// it: the connection, the counters, the policy, and the drop in monitor.
func TestPrivilegedLiveDatapath(t *testing.T) {
	testenv.Privileged(t) // creates namespaces, veths and BPF programs
	c, err := dptest.New(dptest.Options{Mode: spec.Tunnel, PolicyIngress: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("remove cluster: %v", err)
		}
	})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	client, other, server := n1.Pods[0], n1.Pods[1], n2.Pods[0]
	srv, err := dptest.ServeTCPEcho(server.NS, server.IP, 8080)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	allow := spec.PolicyEntry{Direction: spec.Ingress, Identity: client.Identity, Protocol: 6, Port: 8080}
	if err := n2.DP.Maps().SetPolicy(server.ID, []spec.PolicyEntry{allow}); err != nil {
		t.Fatal(err)
	}

	// The monitor reads the ring buffer from the start: events that
	// came before it opened the reader still show.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events syncBuffer
	monitorDone := make(chan error, 1)
	go func() {
		cmd := newRootCommand(&events)
		// No agent: the monitor reads the pinned ring buffer itself.
		cmd.SetArgs([]string{"monitor", "--type", "drop", "-o", "json", "--bpf-root", n2.BPFFSDir,
			"--socket-path", filepath.Join(t.TempDir(), "no-agent.sock")})
		monitorDone <- cmd.ExecuteContext(ctx)
	}()

	if err := dptest.TCPEcho(client.NS, server.IP, 8080); err != nil {
		t.Fatalf("allowed client: %v", err)
	}
	if conn, err := dptest.DialTCP(other.NS, server.IP, 8080, 500*time.Millisecond); err == nil {
		conn.Close()
		t.Fatalf("%s reached %s without a rule", other.Name, server.Name)
	}

	drop := waitForEvent(t, &events, func(v models.MonitorEvent) bool {
		return v.Dst == server.IP.String() && v.DstPort == 8080 && v.Src == other.IP.String()
	})
	if drop.Reason != "Policy denied" || drop.SrcIdentity != other.Identity || drop.Direction != "ingress" || drop.Protocol != "tcp" {
		t.Errorf("drop event %+v", drop)
	}
	cancel()
	if err := <-monitorDone; err != nil {
		t.Errorf("monitor: %v", err)
	}

	checkLiveMaps(t, c, client, server)
}

// checkLiveMaps reads server's node after client reached it and another
// pod was denied.
func checkLiveMaps(t *testing.T, c *dptest.Cluster, client, server *dptest.Pod) {
	n2 := server.Node
	var conns []bpfConnection
	bpfJSON(t, n2.BPFFSDir, &conns, "bpf", "ct", "list")
	found := false
	for _, ct := range conns {
		if ct.Src == client.IP.String() && ct.Dst == server.IP.String() && ct.DstPort == 8080 && ct.Protocol == "tcp" {
			found = true
			if !ct.SeenReply || ct.Packets == 0 || ct.ExpiresIn <= 0 || ct.SrcIdentity != client.Identity {
				t.Errorf("connection %+v", ct)
			}
		}
	}
	if !found {
		t.Errorf("bpf ct list has no %s -> %s:8080: %+v", client.IP, server.IP, conns)
	}

	var counters []bpfCounter
	bpfJSON(t, n2.BPFFSDir, &counters, "bpf", "metrics", "list")
	var forwarded, denied uint64
	for _, ct := range counters {
		switch ct.ReasonCode {
		case uint8(spec.Forwarded):
			forwarded += ct.Packets
		case uint8(spec.DropPolicy):
			denied += ct.Packets
		}
	}
	if forwarded == 0 || denied == 0 {
		t.Errorf("bpf metrics list: forwarded %d, policy denied %d: %+v", forwarded, denied, counters)
	}

	var policy []bpfPolicyEntry
	bpfJSON(t, n2.BPFFSDir, &policy, "bpf", "policy", "list", itoa(server.ID))
	want := []bpfPolicyEntry{{Direction: "ingress", Identity: client.Identity, Protocol: 6, Port: 8080, Verdict: "allow"}}
	if !equalJSON(policy, want) {
		t.Errorf("bpf policy list %d: %+v", server.ID, policy)
	}

	var eps []bpfEndpoint
	bpfJSON(t, n2.BPFFSDir, &eps, "bpf", "endpoint", "list")
	if len(eps) != len(n2.Pods) {
		t.Fatalf("bpf endpoint list: %+v, want %d pods", eps, len(n2.Pods))
	}
	for i, p := range n2.Pods {
		if eps[i].ID != p.ID || eps[i].IPv4 != p.IP.String() || eps[i].Identity != p.Identity || !eps[i].PolicyIngress {
			t.Errorf("endpoint %+v, want pod %s", eps[i], p.Name)
		}
	}

	var ipcache []models.IPCacheEntry
	bpfJSON(t, n2.BPFFSDir, &ipcache, "bpf", "ipcache", "list")
	if want := models.IPCacheEntries(c.IPCacheFor(n2)); len(ipcache) == 0 || !equalJSON(ipcache, want) {
		t.Errorf("bpf ipcache list: %+v\nwant %+v", ipcache, want)
	}
}

// waitForEvent polls the monitor's JSON lines until one matches.
func waitForEvent(t *testing.T, out *syncBuffer, match func(models.MonitorEvent) bool) models.MonitorEvent {
	t.Helper()
	var found models.MonitorEvent
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, l := range strings.Split(out.String(), "\n") {
			var v models.MonitorEvent
			if l != "" && json.Unmarshal([]byte(l), &v) == nil && match(v) {
				found = v
				return nil
			}
		}
		return fmt.Errorf("no matching event in monitor output:\n%s", out.String())
	})
	return found
}

func itoa(id uint16) string { return strconv.Itoa(int(id)) }

// TestPrivilegedIPCacheLookupAndCTFlush looks addresses up in a real
// pinned ipcache as Cilium's cilium-dbg does (and cilium-cli parses), and
// flushes real conntrack entries, all or an endpoint's.
func TestPrivilegedIPCacheLookupAndCTFlush(t *testing.T) {
	testenv.Privileged(t) // mounts a bpffs and creates BPF maps
	root := testnode.TempBPFFS(t)
	writePins(t, filepath.Join(root, "maps"))
	noAgent := filepath.Join(t.TempDir(), "no-agent.sock")
	bpf := func(args ...string) (string, error) {
		return run(t, noAgent, append(args, "--bpf-root", root)...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		// The longest prefix holding the address.
		{[]string{"bpf", "ipcache", "get", "10.10.2.5"}, "10.10.2.5 maps to identity identity=1020 encryptkey=0 tunnelendpoint=192.168.50.2 flags=<none>\n"},
		{[]string{"bpf", "ipcache", "get", "10.10.2.21"}, "10.10.2.21 maps to identity identity=1021 encryptkey=0 tunnelendpoint=192.168.50.2 flags=<none>\n"},
		{[]string{"bpf", "ipcache", "get", "10.10.1.12"}, "10.10.1.12 maps to identity identity=1012 encryptkey=0 tunnelendpoint=0.0.0.0 flags=<none>\n"},
		{[]string{"bpf", "ipcache", "match", "10.10.2.0/24"}, `key 10.10.2.0/24 has value "identity=1020 encryptkey=0 tunnelendpoint=192.168.50.2 flags=<none>"` + "\n"},
	} {
		if out, err := bpf(tc.args...); err != nil || out != tc.want {
			t.Errorf("%v: %q %v, want %q", tc.args, out, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bpf", "ipcache", "get", "8.8.8.8"}, "8.8.8.8 does not map to any identity"},
		{[]string{"bpf", "ipcache", "get", "10.10.2"}, `ip "10.10.2": not an IP address`},
		{[]string{"bpf", "ipcache", "match", "10.10.2.0/25"}, "10.10.2.0/25 does not match to any ipcache entry"},
		{[]string{"bpf", "ipcache", "match", "10.10.2.0"}, `prefix "10.10.2.0": not a prefix`},
		{[]string{"bpf", "ct", "flush", "99"}, "endpoint 99: not in the datapath's endpoints"},
		{[]string{"bpf", "ipcache", "delete", "10.10.9.0/24"}, "10.10.9.0/24 does not match to any ipcache entry"},
		{[]string{"bpf", "ipcache", "update", "10.10.9.1/24", "--identity", "5"}, `prefix "10.10.9.1/24": not an IPv4 prefix without host bits`},
		{[]string{"bpf", "ipcache", "update", "10.10.9.0/24"}, "--identity: required"},
		{[]string{"bpf", "ipcache", "update", "10.10.9.0/24", "--identity", "5", "--encryptkey", "3"}, "--encryptkey 3: cilium-go has no encryption"},
		{[]string{"bpf", "ipcache", "update", "10.10.9.0/24", "--identity", "5", "--tunnelendpoint", "x"}, `--tunnelendpoint "x": not an IPv4 address`},
		{[]string{"bpf", "ct", "flush", "all"}, `endpoint "all": want global or an endpoint id`},
	} {
		if out, err := bpf(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) || out != "" {
			t.Errorf("%v: %q %v, want an error naming %q", tc.args, out, err, tc.want)
		}
	}

	// As cilium-cli's pod-to-pod-missing-ipcache: read an entry, delete it,
	// write it back from what get printed.
	if _, err := bpf("bpf", "ipcache", "delete", "10.10.2.21/32"); err != nil {
		t.Fatal(err)
	}
	if out, err := bpf("bpf", "ipcache", "get", "10.10.2.21"); err != nil || !strings.Contains(out, "identity=1020 ") {
		t.Fatalf("after the delete, the /24 holds the address: %q %v", out, err)
	}
	if _, err := bpf("bpf", "ipcache", "update", "10.10.2.21/32", "--tunnelendpoint", "192.168.50.2", "--identity", "1021",
		"--encryptkey", "0"); err != nil {
		t.Fatal(err)
	}
	if out, err := bpf("bpf", "ipcache", "match", "10.10.2.21/32"); err != nil ||
		out != `key 10.10.2.21/32 has value "identity=1021 encryptkey=0 tunnelendpoint=192.168.50.2 flags=<none>"`+"\n" {
		t.Fatalf("after the update: %q %v", out, err)
	}

	// Three connections, two of them endpoint 11's (10.10.1.11).
	m, err := datapath.OpenPinnedMaps(filepath.Join(root, "maps"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	be32 := func(s string) uint32 {
		b := netip.MustParseAddr(s).As4()
		return binary.NativeEndian.Uint32(b[:])
	}
	for i, c := range [][2]string{{"10.10.1.11", "10.10.2.21"}, {"10.10.2.21", "10.10.1.11"}, {"10.10.1.12", "10.10.2.21"}} {
		k := datapath.CTKey{Saddr: be32(c[0]), Daddr: be32(c[1]), Sport: uint16(1000 + i), Dport: 80, Protocol: 6}
		if err := m.CT4.Put(k, datapath.CTEntry{Expires: uint64(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	ctPath := filepath.Join(root, "maps", "cilium_ct4")
	if out, err := bpf("bpf", "ct", "flush", "11"); err != nil || out != "Flushed 2 entries from "+ctPath+"\n" {
		t.Fatalf("flush 11: %q %v", out, err)
	}
	var conns []bpfConnection
	bpfJSON(t, root, &conns, "bpf", "ct", "list")
	if len(conns) != 1 || conns[0].Src != "10.10.1.12" {
		t.Fatalf("after flushing endpoint 11: %+v", conns)
	}
	if out, err := bpf("bpf", "ct", "flush", "global"); err != nil || out != "Flushed 1 entries from "+ctPath+"\n" {
		t.Fatalf("flush global: %q %v", out, err)
	}
	bpfJSON(t, root, &conns, "bpf", "ct", "list")
	if len(conns) != 0 {
		t.Fatalf("after flushing all: %+v", conns)
	}
}
