package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	healthmodels "github.com/cilium/cilium/api/v1/health/models"
)

// TestPrivilegedSmokeHealth: on a two-node cilium-go lab, each agent runs
// its health endpoint with an address of its pod CIDR, published in its
// CiliumNode, and cilium-health status --probe -o json on either node
// reports both nodes and both health endpoints reachable over ICMP and
// HTTP, in Cilium's health models.
func TestPrivilegedSmokeHealth(t *testing.T) {
	lab := StartLab(t, "hlth", "--nodes", "2", "--cni=cilium", "--routing-mode=tunnel", "--kube-proxy=none")
	nodes := []string{"hlth-node1", "hlth-node2"}
	cidrs := ciliumNodeCIDRs(lab)

	health := map[string]string{}
	lab.Eventually("health endpoints published", 2*time.Minute, func() error {
		var list struct {
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
				Spec     struct {
					Health struct{ IPv4 string } `json:"health"`
				} `json:"spec"`
			} `json:"items"`
		}
		out, err := lab.run("kubectl", "get", "ciliumnodes", "-o", "json")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return err
		}
		for _, n := range list.Items {
			if n.Spec.Health.IPv4 == "" || !inPrefix(cidrs[n.Metadata.Name], n.Spec.Health.IPv4) {
				return fmt.Errorf("CiliumNode %s spec.health.ipv4 %q, want an address of %s", n.Metadata.Name, n.Spec.Health.IPv4, cidrs[n.Metadata.Name])
			}
			health[n.Metadata.Name] = n.Spec.Health.IPv4
		}
		if len(health) != 2 {
			return fmt.Errorf("health endpoints %v", health)
		}
		return nil
	})

	for _, from := range nodes {
		lab.Eventually("cilium-health on "+from, 2*time.Minute, func() error {
			sr, err := healthProbe(lab, from)
			if err != nil {
				return err
			}
			if sr.Local == nil || sr.Local.Name != from || len(sr.Nodes) != 2 {
				return fmt.Errorf("local %+v, %d nodes", sr.Local, len(sr.Nodes))
			}
			for _, n := range sr.Nodes {
				if n.Host == nil || n.HealthEndpoint == nil {
					return fmt.Errorf("node %s: %+v", n.Name, n)
				}
				for _, p := range []*healthmodels.PathStatus{n.Host.PrimaryAddress, n.HealthEndpoint.PrimaryAddress} {
					if p == nil || p.Icmp == nil || p.HTTP == nil || p.Icmp.Status != "" || p.HTTP.Status != "" {
						return fmt.Errorf("node %s path %+v: ICMP %+v HTTP %+v", n.Name, p, p.Icmp, p.HTTP)
					}
				}
				if n.HealthEndpoint.PrimaryAddress.IP != health[n.Name] {
					return fmt.Errorf("node %s health endpoint probed at %s, published %s", n.Name, n.HealthEndpoint.PrimaryAddress.IP, health[n.Name])
				}
			}
			return nil
		})
	}
	out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, nodes[0], "--",
		filepath.Join(*binDir, "cilium-health"), "status", "--verbose")
	t.Logf("cilium-health status --verbose on %s:\n%s", nodes[0], out)
	if err != nil || !strings.Contains(out, "2/2 reachable") {
		t.Errorf("cilium-health status: %v", err)
	}

	// A killed agent takes its health endpoint's responder along: node1
	// sees node2's health endpoint stop answering HTTP. The restarted
	// agent makes the endpoint afresh, and both nodes answer again.
	pid := agentPID(t, nodes[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lab.Eventually("node2's health endpoint down while its agent is", time.Minute, func() error {
		if p := agentPIDOrZero(nodes[1]); p != 0 && p != pid {
			return nil // restarted already: nothing to see any more
		}
		sr, err := healthProbe(lab, nodes[0])
		if err != nil {
			return err
		}
		for _, n := range sr.Nodes {
			if n.Name == nodes[1] && n.HealthEndpoint != nil && n.HealthEndpoint.PrimaryAddress.HTTP != nil &&
				n.HealthEndpoint.PrimaryAddress.HTTP.Status != "" {
				t.Logf("node2's health endpoint with its agent down: %s", n.HealthEndpoint.PrimaryAddress.HTTP.Status)
				return nil
			}
		}
		return fmt.Errorf("node2's health endpoint still answers HTTP")
	})
	lab.Eventually("the agent back", time.Minute, func() error {
		if p := agentPIDOrZero(nodes[1]); p == 0 || p == pid {
			return fmt.Errorf("agent not restarted yet")
		}
		return nil
	})
	lab.Eventually("both nodes reachable after the restart", 2*time.Minute, func() error {
		sr, err := healthProbe(lab, nodes[0])
		if err != nil {
			return err
		}
		for _, n := range sr.Nodes {
			for _, p := range []*healthmodels.PathStatus{n.Host.PrimaryAddress, n.HealthEndpoint.PrimaryAddress} {
				if p.Icmp.Status != "" || p.HTTP.Status != "" {
					return fmt.Errorf("node %s %s: ICMP %q HTTP %q", n.Name, p.IP, p.Icmp.Status, p.HTTP.Status)
				}
			}
		}
		return nil
	})
	if out, err := lab.dbg(nodes[1], "endpoint", "list", "-o", "json"); err != nil || strings.Count(out, "lxc_health") != 1 {
		t.Errorf("node2's endpoints after the restart: %v\n%s", err, out)
	}
}

// healthProbe runs cilium-health status --probe -o json on node and
// decodes its answer with Cilium's models.
func healthProbe(lab *Lab, node string) (*healthmodels.HealthStatusResponse, error) {
	out, err := lab.run("cilium-lab", "exec", "--state-dir", lab.StateDir, node, "--",
		filepath.Join(*binDir, "cilium-health"), "status", "--probe", "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	i := strings.Index(out, "{")
	if i < 0 {
		return nil, fmt.Errorf("no JSON in %q", out)
	}
	sr := &healthmodels.HealthStatusResponse{}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(sr); err != nil {
		return nil, fmt.Errorf("decode %q: %w", out, err)
	}
	return sr, nil
}
