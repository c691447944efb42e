package cluster

import (
	"crypto/x509"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/lab/internal/pki"
	"github.com/cilium-go/cilium/lab/internal/plan"
)

// The world's server runs in the outside client, on every world address, with a
// certificate from the lab CA for every name and address, and the DNS of every
// name (and the alias) on the first address, where the cluster's DNS forwards
// the world's zones.
func TestWorldServer(t *testing.T) {
	o := plan.DefaultOptions()
	o.CNI = plan.CNIBridge
	o.StateDir = t.TempDir()
	p, err := plan.New(o)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := worldProcess(p, "/lab/bin")
	if !ok {
		t.Fatal("no world process")
	}
	l := layout{p.StateDir}
	wantArgs := []string{"world-server", "--addr=192.0.2.1", "--addr=192.0.2.2",
		"--addr=192.0.2.3", "--addr=192.0.2.4", "--addr=192.0.2.5", "--addr=192.0.2.6", "--http-port=80", "--https-port=443",
		"--cert=" + l.worldCert(), "--key=" + l.worldKey(), "--dns-port=53",
		"--host=world.cilium-lab.test=192.0.2.1", "--host=other.world.cilium-lab.test=192.0.2.2",
		"--host=api.github.com=192.0.2.3", "--host=support.github.com=192.0.2.4", "--host=gist.github.com=192.0.2.5",
		"--host=github.com=192.0.2.6", "--alias=www.cilium-lab.test=world.cilium-lab.test"}
	if s.Path != "/lab/bin/cilium-lab" || !slices.Equal(s.Args, wantArgs) || s.Namespaces.Net != p.Outside.Netns {
		t.Errorf("world process %+v, want cilium-lab %v in %s", s, wantArgs, p.Outside.Netns)
	}

	if d := worldDNS(p); !slices.Equal(d.Zones, []string{"cilium-lab.test", "github.com"}) || d.Server != p.World.Target.IP {
		t.Errorf("cluster DNS forwards %v to %s, want cilium-lab.test and github.com to %s", d.Zones, d.Server, p.World.Target.IP)
	}

	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	if err := ensureWorldCert(p, ca); err != nil {
		t.Fatal(err)
	}
	cert, err := pki.LoadCert(l.worldCert())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"world.cilium-lab.test", "other.world.cilium-lab.test", "192.0.2.1", "192.0.2.2",
		"api.github.com", "support.github.com", "gist.github.com", "github.com", "192.0.2.6", "www.cilium-lab.test"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name}); err != nil {
			t.Errorf("the world's certificate for %s: %v", name, err)
		}
	}

	// A plan from before the world: nothing to run, nothing for DNS.
	p.World = plan.World{}
	if _, ok := worldProcess(p, "/lab/bin"); ok || worldDNS(p).Zones != nil || ensureWorldCert(p, ca) != nil {
		t.Error("a lab without a world got a world server, DNS names or a certificate")
	}
}
