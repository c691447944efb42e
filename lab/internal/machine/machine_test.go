package machine

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		for _, f := range append([]string{p.UnderlayNetns, p.ControlPlaneNS}, p.Nodes[0].Netns, p.Nodes[1].Netns, p.Nodes[0].MntNS) {
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
