// Package addons holds the cluster add-ons the lab installs once its API is up.
package addons

import (
	"bytes"
	_ "embed"
	"net/netip"
	"text/template"
)

//go:embed coredns.yaml
var corednsYAML string

var corednsTmpl = template.Must(template.New("coredns").Option("missingkey=error").Parse(corednsYAML))

// CoreDNSImage is the image the lab maps to its CoreDNS binary.
const CoreDNSImage = "registry.k8s.io/coredns/coredns:v1.14.1"

// WorldDNS is where cluster DNS sends the names of the lab's world: the
// zones (with every name under them) to the world's DNS server.
type WorldDNS struct {
	Zones  []string
	Server netip.Addr
}

// CoreDNS returns the manifests of cluster DNS at dnsIP for domain,
// forwarding the world's zones; none without zones.
func CoreDNS(dnsIP netip.Addr, domain string, world WorldDNS) ([]byte, error) {
	var b bytes.Buffer
	err := corednsTmpl.Execute(&b, map[string]any{"DNSIP": dnsIP.String(), "Domain": domain, "Image": CoreDNSImage, "World": world})
	return b.Bytes(), err
}
