package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// apiOutage is how long the API server stays frozen: longer than the
// DaemonSet's liveness window (10 failures 30 s apart), so that an agent
// whose liveness followed the API server would be restarted. Liveness is
// sampled all along and must pass at every sample.
const apiOutage = 310 * time.Second

// TestPrivilegedLabCiliumAPIServerOutage freezes the lab's API server (SIGSTOP: it
// answers nothing and the supervisor does not restart it) while pods talk
// across nodes. The agents stay live (/healthz 200 at every sample) and
// are not restarted, pod traffic keeps flowing, and once the API server
// returns the agents catch up: a new pod gets its network and its
// CiliumEndpoint, and /readyz passes.
func TestPrivilegedLabCiliumAPIServerOutage(t *testing.T) {
	lab := StartLab(t, "e2eapi", "--nodes", "2", "--cni=cilium", "--kube-proxy=iptables")
	node1, node2 := "e2eapi-node1", "e2eapi-node2"
	lab.KubectlApply(smokeManifest)
	pods := echoPods(lab, 4)
	client, server := onNode(pods, node1)[0], onNode(pods, node2)[0]
	agents := map[string]int{node1: agentPID(t, node1), node2: agentPID(t, node2)}

	api := apiServerPID(t, lab)
	if err := syscall.Kill(api, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(api, syscall.SIGCONT); err != nil {
				t.Errorf("resume the API server: %v", err)
			}
		}
	}
	t.Cleanup(resume) // lab.down needs it, whatever failed

	end := time.Now().Add(apiOutage)
	for time.Now().Before(end) {
		for node, pid := range agents {
			if now := agentPIDOrZero(node); now != pid {
				t.Fatalf("the agent of %s was restarted during the outage (pid %d, was %d)", node, now, pid)
			}
			if code, body, err := agentProbe(pid, 9962, "/healthz"); err != nil || code != http.StatusOK {
				t.Fatalf("%s /healthz (liveness) during the outage: %d %s %v", node, code, body, err)
			}
		}
		if out, err := podConnect(lab, client.ip, server.ip+":8080"); err != nil {
			t.Fatalf("%s -> %s during the outage: %v\n%s", client.name, server.name, err, out)
		}
		time.Sleep(2 * time.Second)
	}
	resume()

	// Catching up: a pod made after the outage gets an address and an
	// endpoint from its node's agent, its CiliumEndpoint is published,
	// and it talks to the pods of the other node.
	lab.Kubectl("delete", "pod", client.name, "--wait=true")
	pods = echoPods(lab, 4)
	for _, p := range onNode(pods, node1) {
		lab.connect(p.name, server.ip+":8080")
	}
	checkEndpointsAndIdentity(t, lab, pods)
	lab.Eventually("both agents ready", time.Minute, func() error {
		for node, pid := range agents {
			if now := agentPIDOrZero(node); now != pid {
				return fmt.Errorf("the agent of %s was restarted (pid %d, was %d)", node, now, pid)
			}
			if code, body, err := agentProbe(pid, 9962, "/readyz"); err != nil || code != http.StatusOK {
				return fmt.Errorf("%s /readyz: %d %s %v", node, code, body, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
			}
		}
		return nil
	})
}

// apiServerPID finds the lab's kube-apiserver: the one whose arguments
// name files of the lab's state directory.
func apiServerPID(t *testing.T, lab *Lab) int {
	t.Helper()
	pid := findProcess(func(args []string) bool {
		return filepath.Base(args[0]) == "kube-apiserver" && strings.Contains(strings.Join(args, " "), lab.StateDir)
	})
	if pid == 0 {
		t.Fatal("no kube-apiserver of the lab")
	}
	return pid
}

// agentProbe asks the agent with process pid for path on port (9962:
// metrics and probes; 9965: Hubble's metrics), from inside its node's
// network namespace: the kubelet's view.
func agentProbe(pid, port int, path string) (int, string, error) {
	var conn net.Conn
	err := netnamespace.Do(fmt.Sprintf("/proc/%d/ns/net", pid), func() (err error) {
		conn, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
		return err
	})
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n", path); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&body)
	return resp.StatusCode, body.String(), nil
}

// podConnect makes one TCP connection from the pod with address from,
// entering its network namespace directly: kubectl exec needs the API
// server.
func podConnect(lab *Lab, from, target string) (string, error) {
	ns, err := podNetNS(lab, from)
	if err != nil {
		return "", err
	}
	out, err := exec.Command("nsenter", "--net="+ns, filepath.Join(*binDir, "agnhost"), "connect", target,
		"--timeout=5s").CombinedOutput()
	return string(out), err
}

// podNetNS finds the network namespace that holds ip among the
// namespaces of the lab's agnhost processes (in its cgroup: another lab
// on the machine may have a pod of the same address).
func podNetNS(lab *Lab, ip string) (string, error) {
	inLab := "/cilium-lab-" + lab.Name + "/"
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || filepath.Base(strings.Split(string(b), "\x00")[0]) != "agnhost" {
			continue
		}
		if cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup")); err != nil || !strings.Contains(string(cg), inLab) {
			continue
		}
		ns := filepath.Join("/proc", e.Name(), "ns", "net")
		out, err := exec.Command("nsenter", "--net="+ns, "ip", "-4", "-o", "addr", "show").Output()
		if err == nil && strings.Contains(string(out), " "+ip+"/") {
			return ns, nil
		}
	}
	return "", fmt.Errorf("no pod process with address %s", ip)
}
