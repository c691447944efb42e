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

// CoreDNS returns the manifests of cluster DNS at dnsIP for domain.
func CoreDNS(dnsIP netip.Addr, domain string) ([]byte, error) {
	var b bytes.Buffer
	err := corednsTmpl.Execute(&b, map[string]string{"DNSIP": dnsIP.String(), "Domain": domain, "Image": CoreDNSImage})
	return b.Bytes(), err
}
