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

// Host is a name cluster DNS answers with an address of its own: what a real
// cluster's upstream resolver would answer for a name of the world.
type Host struct {
	Name string
	IP   netip.Addr
}

// CoreDNS returns the manifests of cluster DNS at dnsIP for domain, answering
// for hosts too.
func CoreDNS(dnsIP netip.Addr, domain string, hosts []Host) ([]byte, error) {
	var b bytes.Buffer
	err := corednsTmpl.Execute(&b, map[string]any{"DNSIP": dnsIP.String(), "Domain": domain, "Image": CoreDNSImage, "Hosts": hosts})
	return b.Bytes(), err
}
