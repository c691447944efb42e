package machine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium-go/cilium/lab/internal/netns"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/record"
)

// The test binary doubles as `cilium-lab node-init`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "node-init" {
		var hostname string
		var binds []string
		for i := 2; i+1 < len(os.Args); i += 2 {
			switch os.Args[i] {
			case "--hostname":
				hostname = os.Args[i+1]
			case "--bind":
				binds = append(binds, os.Args[i+1])
			}
		}
		if err := NodeInit(hostname, binds); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPrivilegedMachines(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates namespaces")
	}
	o := plan.DefaultOptions()
	o.CNI = plan.CNIBridge
	o.Name = fmt.Sprintf("mt%d", os.Getpid()%100000)
	o.StateDir = filepath.Join(t.TempDir(), "state")
	o.Nodes = 2
	p, err := plan.New(o)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(p.StateDir, 0o700)
	rec := record.Open(filepath.Join(t.TempDir(), "record.json"))
	t.Cleanup(func() {
		entries, _ := record.Read(rec.Path())
		if err := record.Teardown(entries, record.System{}); err != nil {
			t.Errorf("teardown: %v", err)
		}
		for _, f := range append([]string{p.UnderlayNetns, p.ControlPlaneNS, p.Outside.Netns}, p.Nodes[0].Netns, p.Nodes[1].Netns, p.Nodes[0].MntNS) {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s left behind", f)
			}
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if bytes.Contains(mounts, []byte(p.StateDir)) || bytes.Contains(mounts, []byte("/run/netns/"+o.Name+"-")) {
			t.Errorf("mounts left behind:\n%s", mounts)
		}
	})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	before := rootNetwork(t)
	if err := (Builder{Plan: p, Record: rec, Self: self}).Create(); err != nil {
		t.Fatal(err)
	}

	// The nodes reach each other and the control plane over the underlay.
	n1, n2 := p.Nodes[0], p.Nodes[1]
	ln, err := netns.Listen(n2.Netns, "tcp", net.JoinHostPort(n2.IP.String(), "7000"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.WriteString(c, "hello from "+n2.Name)
			c.Close()
		}
	}()
	conn, err := netns.Dialer(n1.Netns)(t.Context(), "tcp", net.JoinHostPort(n2.IP.String(), "7000"))
	if err != nil {
		t.Fatalf("node1 -> node2: %v", err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(conn)
	conn.Close()
	if string(got) != "hello from "+n2.Name {
		t.Fatalf("node2 answered %q", got)
	}
	checkOutside(t, p)
	checkWorld(t, p)

	// The root namespace is exactly as it was: no link, address or route was added.
	if after := rootNetwork(t); after != before {
		t.Errorf("the root network namespace changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Each node has its hostname, its own bpffs and its directories.
	nsenter := func(n plan.Node, args ...string) string {
		t.Helper()
		cmd := exec.Command("nsenter", append([]string{"--net=" + n.Netns, "--mount=" + n.MntNS, "--uts=" + n.UTSNS, "--"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nsenter %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if h := strings.TrimSpace(nsenter(n1, "hostname")); h != n1.Name {
		t.Errorf("hostname on node1 %q", h)
	}
	mi := nsenter(n1, "cat", "/proc/self/mountinfo")
	if !strings.Contains(mi, " /sys/fs/bpf ") || !strings.Contains(mi, " - bpf ") {
		t.Errorf("no bpffs at /sys/fs/bpf on node1:\n%s", mi)
	}
	os.WriteFile(filepath.Join(n1.Dir, "etc-cni-net.d", "marker"), []byte("node1"), 0o644)
	if got := nsenter(n1, "cat", "/etc/cni/net.d/marker"); got != "node1" {
		t.Errorf("node1 /etc/cni/net.d shows %q", got)
	}
	if out, err := exec.Command("nsenter", "--mount="+n2.MntNS, "--", "ls", "/etc/cni/net.d").CombinedOutput(); err != nil || strings.Contains(string(out), "marker") {
		t.Errorf("node2 sees node1's CNI dir: %s %v", out, err)
	}
	// Mounts of a node never reach the host.
	if b, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(b, []byte(n1.Dir)) {
		t.Error("a node's bind mount propagated to the host")
	}
}

// checkOutside: the outside client is on the underlay, every machine reaches it and
// routes by default through it, and it has no way into the cluster.
func checkOutside(t *testing.T, p plan.Plan) {
	t.Helper()
	out := p.Outside
	ln, err := netns.Listen(out.Netns, "tcp", net.JoinHostPort(out.IP.String(), "7001"))
	if err != nil {
		t.Fatalf("listen on the outside client: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "outside")
			c.Close()
		}
	}()
	for _, m := range []struct{ name, ns string }{{"control plane", p.ControlPlaneNS}, {p.Nodes[0].Name, p.Nodes[0].Netns}} {
		conn, err := netns.Dialer(m.ns)(t.Context(), "tcp", net.JoinHostPort(out.IP.String(), "7001"))
		if err != nil {
			t.Fatalf("%s -> outside client: %v", m.name, err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(conn)
		conn.Close()
		if string(got) != "outside" {
			t.Errorf("%s: the outside client answered %q", m.name, got)
		}
		if r := ipIn(t, m.ns, "route", "show", "default"); !strings.Contains(r, "via "+out.IP.String()) {
			t.Errorf("%s: default route %q, want one via %s", m.name, r, out.IP)
		}
	}

	// From a node, a Service address with nothing behind it is routed (to the outside
	// client, which drops it): connect times out instead of ENETUNREACH.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	svc := net.JoinHostPort(p.ClusterDNS.String(), "53")
	conn, err := netns.Dialer(p.Nodes[0].Netns)(ctx, "tcp", svc)
	if err == nil {
		conn.Close()
		t.Fatalf("connect %s from a node succeeded: nothing should answer", svc)
	}
	if errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("connect %s from a node: %v; want it routed, like a node with a default route", svc, err)
	}

	// The outside client itself knows no way to pods or Services and forwards nothing.
	for _, dst := range []netip.Addr{p.ClusterDNS, p.ClusterCIDR.Addr().Next()} {
		if r, err := exec.Command("nsenter", "--net="+out.Netns, "--", "ip", "route", "get", dst.String()).CombinedOutput(); err == nil {
			t.Errorf("the outside client has a route to %s: %s", dst, r)
		}
	}
	if r := ipIn(t, out.Netns, "route", "show"); strings.Contains(r, "default") {
		t.Errorf("the outside client has a default route:\n%s", r)
	}
	var fwd []byte
	netns.Do(out.Netns, func() error {
		fwd, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		return err
	})
	if strings.TrimSpace(string(fwd)) != "0" {
		t.Errorf("the outside client forwards: ip_forward=%q (%v)", fwd, err)
	}
}

// checkWorld: the outside client holds the world's addresses, after its uplink's
// (which the e2e tests take for the outside's address), and every machine reaches
// them by its default route.
func checkWorld(t *testing.T, p plan.Plan) {
	t.Helper()
	out := p.Outside
	var addrs []string
	if err := netns.Do(out.Netns, func() error {
		as, err := net.InterfaceAddrs()
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				addrs = append(addrs, n.String())
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{out.IP.String() + "/24"}
	for _, h := range p.World.Hosts() {
		want = append(want, h.IP.String()+"/32")
	}
	if len(want) != 1+2+len(plan.GuideNames) {
		t.Fatalf("the world's hosts %v: want the target, the other and the guides' %d names", p.World.Hosts(), len(plan.GuideNames))
	}
	if strings.Join(addrs, " ") != strings.Join(want, " ") {
		t.Errorf("outside client addresses %v, want %v", addrs, want)
	}
	for _, h := range p.World.Hosts() {
		ln, err := netns.Listen(out.Netns, "tcp", net.JoinHostPort(h.IP.String(), "7003"))
		if err != nil {
			t.Fatalf("listen on %s in the outside client: %v", h.IP, err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, h.Name)
				c.Close()
			}
		}()
		for _, m := range []struct{ name, ns string }{{"control plane", p.ControlPlaneNS}, {p.Nodes[1].Name, p.Nodes[1].Netns}} {
			conn, err := netns.Dialer(m.ns)(t.Context(), "tcp", net.JoinHostPort(h.IP.String(), "7003"))
			if err != nil {
				t.Errorf("%s -> %s: %v", m.name, h.IP, err)
				continue
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			got, _ := io.ReadAll(conn)
			conn.Close()
			if string(got) != h.Name {
				t.Errorf("%s -> %s answered %q", m.name, h.IP, got)
			}
		}
		ln.Close()
	}
}

// ipIn runs `ip ARGS...` in the network namespace at nsPath.
func ipIn(t *testing.T, nsPath string, args ...string) string {
	t.Helper()
	out, err := exec.Command("nsenter", append([]string{"--net=" + nsPath, "--", "ip"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v in %s: %v\n%s", args, nsPath, err, out)
	}
	return string(out)
}

// rootNetwork describes the links, addresses and routes of the root network namespace.
func rootNetwork(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"-br", "link"}, {"-br", "addr"}, {"route", "show", "table", "all"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v", args, err)
		}
		b.Write(out)
	}
	return b.String()
}
