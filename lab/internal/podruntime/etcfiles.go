package podruntime

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// podHostname returns the pod's hostname and, when the pod names a subdomain, its
// fully qualified name (hostname.subdomain.namespace.svc.domain), as the kubelet does.
func podHostname(pod *corev1.Pod, clusterDomain string) (string, string) {
	host := pod.Name
	if pod.Spec.Hostname != "" {
		host = pod.Spec.Hostname
	}
	if len(host) > 63 {
		host = strings.TrimRight(host[:63], "-.")
	}
	if pod.Spec.Subdomain == "" {
		return host, ""
	}
	return host, fmt.Sprintf("%s.%s.%s.svc.%s", host, pod.Spec.Subdomain, pod.Namespace, clusterDomain)
}

// hostsFile renders the pod's /etc/hosts. A host-network pod gets the node's file
// (nodeHosts) plus its host aliases.
func hostsFile(pod *corev1.Pod, ips []netip.Addr, clusterDomain string, nodeHosts []byte) []byte {
	var b strings.Builder
	if pod.Spec.HostNetwork {
		b.Write(nodeHosts)
		if len(nodeHosts) > 0 && !strings.HasSuffix(string(nodeHosts), "\n") {
			b.WriteString("\n")
		}
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
		host, fqdn := podHostname(pod, clusterDomain)
		for _, ip := range ips {
			if fqdn != "" {
				fmt.Fprintf(&b, "%s\t%s\t%s\n", ip, fqdn, host)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, host)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return []byte(b.String())
}

// resolvConf renders the pod's /etc/resolv.conf from its dnsPolicy and dnsConfig;
// nodeResolv is the node's own file, used by the Default policy and as the fallback
// when no cluster DNS is configured.
func resolvConf(pod *corev1.Pod, clusterDNS netip.Addr, clusterDomain string, nodeResolv []byte) []byte {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if (policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet) && !clusterDNS.IsValid() {
		policy = corev1.DNSDefault
	}

	var servers, searches, options []string
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		servers = []string{clusterDNS.String()}
		searches = []string{pod.Namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
		options = []string{"ndots:5"}
	case corev1.DNSDefault:
		servers, searches, options = parseResolvConf(nodeResolv)
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = appendNew(servers, c.Nameservers...)
		searches = appendNew(searches, c.Searches...)
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			options = slices.DeleteFunc(options, func(s string) bool {
				name, _, _ := strings.Cut(s, ":")
				return name == o.Name
			})
			options = append(options, opt)
		}
	}
	var b strings.Builder
	if len(searches) > 0 {
		b.WriteString("search " + strings.Join(searches, " ") + "\n")
	}
	for _, s := range servers {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(options) > 0 {
		b.WriteString("options " + strings.Join(options, " ") + "\n")
	}
	return []byte(b.String())
}

func parseResolvConf(data []byte) (servers, searches, options []string) {
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			servers = append(servers, f[1])
		case "search", "domain":
			searches = f[1:]
		case "options":
			options = append(options, f[1:]...)
		}
	}
	return servers, searches, options
}

func appendNew(list []string, more ...string) []string {
	for _, m := range more {
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	return list
}

// rewriteInPlace replaces a file's content without replacing its inode, so bind
// mounts of it inside a running sandbox see the change.
func rewriteInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
