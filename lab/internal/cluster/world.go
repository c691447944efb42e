package cluster

import (
	"path/filepath"

	"github.com/cilium-go/cilium/lab/internal/addons"
	"github.com/cilium-go/cilium/lab/internal/pki"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/proc"
	"github.com/cilium-go/cilium/lab/internal/world"
)

// The world's serving certificate, from the lab CA (<state>/pki/ca.crt, which
// a client passes as curl --cacert to verify it).
func (l layout) worldCert() string { return filepath.Join(l.pki(), "world.crt") }
func (l layout) worldKey() string  { return filepath.Join(l.pki(), "world.key") }

// ensureWorldCert issues the world's certificate: both names and both addresses,
// so that a client verifies it whether it asks for the external target by name
// (pod-to-world) or by address (pod-to-cidr).
func ensureWorldCert(p plan.Plan, ca *pki.CA) error {
	if !p.World.Valid() {
		return nil
	}
	l := layout{p.StateDir}
	req := pki.Request{CommonName: p.World.Target.Name, Usage: pki.ServerAuth}
	for _, h := range p.World.Hosts() {
		req.DNSNames = append(req.DNSNames, h.Name)
		req.IPs = append(req.IPs, h.IP)
	}
	req.DNSNames = append(req.DNSNames, plan.WorldAliasName)
	_, _, err := ca.Ensure(l.worldCert(), l.worldKey(), req)
	return err
}

// worldProcess is the world's server, in the outside client's network namespace;
// none for a lab made before it had a world.
func worldProcess(p plan.Plan, binDir string) (proc.Spec, bool) {
	if !p.World.Valid() {
		return proc.Spec{}, false
	}
	l := layout{p.StateDir}
	cfg := world.DefaultConfig()
	for _, h := range p.World.Hosts() {
		cfg.Addrs = append(cfg.Addrs, h.IP)
	}
	for _, h := range p.World.Hosts() {
		cfg.Hosts = append(cfg.Hosts, h.Name+"="+h.IP.String())
	}
	cfg.Aliases = []string{plan.WorldAliasName + "=" + p.World.Target.Name}
	cfg.CertFile, cfg.KeyFile = l.worldCert(), l.worldKey()
	return proc.Spec{
		Name:       "world",
		Path:       filepath.Join(binDir, "cilium-lab"),
		Args:       append([]string{"world-server"}, cfg.Args()...),
		Namespaces: proc.Namespaces{Net: p.Outside.Netns},
		LogFile:    filepath.Join(l.logs(), "world.log"),
	}, true
}

// worldDNS is where the cluster's DNS sends the world's names: its zones to the
// world server's DNS, on the external target's address.
func worldDNS(p plan.Plan) addons.WorldDNS {
	if !p.World.Valid() {
		return addons.WorldDNS{}
	}
	return addons.WorldDNS{Zones: p.World.Zones(), Server: p.World.Target.IP}
}
