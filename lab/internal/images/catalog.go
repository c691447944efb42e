// Package images maps container image references to what the lab can run in their
// place. The lab pulls no images: a pod's root is the host's filesystem, and an image
// contributes only its entry binaries (built into the lab's bin directory) and its
// default entrypoint and command. The catalog is pure data; the pod runtime checks
// that the binaries exist when it starts a container.
package images

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// ErrUnknown is returned by Resolve for references no rule matches.
var ErrUnknown = errors.New("image not available in the lab")

// File is a host file that appears at Path inside the pod's root.
type File struct {
	Host string
	Path string
	// Optional files are left out when the host lacks them (a tool not built yet);
	// a missing required file makes the image unavailable.
	Optional bool
}

// Image is what a container of a given image reference runs.
type Image struct {
	// Ref is the reference as the pod spec wrote it.
	Ref string
	// Repository is the normalized repository, e.g. "docker.io/library/busybox".
	Repository string
	// Files are bound into the pod root before the containers start.
	Files []File
	// Entrypoint and Cmd follow Docker's semantics: a container's command replaces
	// Entrypoint, its args replace Cmd.
	Entrypoint []string
	Cmd        []string
	// User is the image's numeric USER, if it sets one: a container without
	// runAsUser runs as it.
	User *int64
	// Group is the group of the image's USER, when it names one (USER 65532:65532):
	// a container that runs as the image's user runs with it.
	Group *int64
	// WorkingDir is the image's WORKDIR, if it sets one other than /: a container
	// without workingDir starts there.
	WorkingDir string
	// ID is what the runtime reports as the container's imageID.
	ID string
}

// Spec describes an image family relative to the catalog's bin directory.
type Spec struct {
	// Binaries maps a file name in the bin directory to its path in the pod root.
	Binaries map[string]string
	// Extras are like Binaries but optional.
	Extras map[string]string
	// Aliases are further paths in the pod root (keys) of a file of the bin
	// directory (values) that Binaries or Extras already hold: a binary that
	// an image carries under two names. Optional like Extras.
	Aliases    map[string]string
	Entrypoint []string
	Cmd        []string
	User       *int64
	Group      *int64
	WorkingDir string
}

// Rule maps the repositories it matches to a Spec.
type Rule struct {
	// Repositories are normalized repository names (see Normalize) matched exactly.
	Repositories []string
	// Prefix, when set, matches every repository under it, e.g. "ghcr.io/cilium-go/".
	Prefix string
	Spec   Spec
}

func (r Rule) matches(repo string) bool {
	if r.Prefix != "" && strings.HasPrefix(repo, r.Prefix) {
		return true
	}
	for _, want := range r.Repositories {
		if repo == want {
			return true
		}
	}
	return false
}

// Catalog resolves references against an ordered list of rules; later rules win, so
// callers can override the defaults with Register.
type Catalog struct {
	binDir string
	rules  []Rule
}

// New returns a catalog with the lab's default images, whose binaries live in binDir.
func New(binDir string) *Catalog {
	c := &Catalog{binDir: binDir}
	for _, r := range DefaultRules() {
		c.Register(r)
	}
	return c
}

// BinDir is the directory the catalog's binaries are taken from.
func (c *Catalog) BinDir() string { return c.binDir }

// Register adds a rule that takes precedence over every rule registered before it.
func (c *Catalog) Register(r Rule) { c.rules = append(c.rules, r) }

// e2e is the registry of Kubernetes' e2e test images.
const e2e = "registry.k8s.io/e2e-test-images/"

// DefaultRules are the images every lab knows: agnhost (and pause, served by
// agnhost), CoreDNS, shell images whose shell comes from the host, cilium-go's own
// images laid out like Cilium's (binaries in /usr/bin, no entrypoint for the agent
// image, whose DaemonSet names the command), and the images of Kubernetes' e2e
// tests (test/utils/image/manifest.go) whose behaviour agnhost or the host's tools
// provide; see e2eRules.
func DefaultRules() []Rule {
	agnhost := map[string]string{"agnhost": "/agnhost"}
	return append([]Rule{
		{
			Repositories: []string{"ghcr.io/cilium-go/cilium"},
			Spec: Spec{
				// The DaemonSet's init container copies cilium-cni with the
				// host's /bin/sh, cp and mv; `kubectl exec ds/cilium -- cilium-dbg`
				// (or `cilium`, its old name) and hubble are the node's tools.
				Binaries: map[string]string{"cilium-agent": "/usr/bin/cilium-agent", "cilium-cni": "/usr/bin/cilium-cni",
					"cilium-dbg": "/usr/bin/cilium-dbg", "cilium-proxy": "/usr/bin/cilium-proxy"},
				Extras:  map[string]string{"hubble": "/usr/bin/hubble", "cilium-health": "/usr/bin/cilium-health"},
				Aliases: map[string]string{"/usr/bin/cilium": "cilium-dbg"},
				Cmd:     []string{"/usr/bin/cilium-agent"},
			},
		},
		{
			Repositories: []string{"ghcr.io/cilium-go/operator"},
			Spec:         Spec{Binaries: map[string]string{"cilium-operator": "/usr/bin/cilium-operator"}, Cmd: []string{"/usr/bin/cilium-operator"}},
		},
		{
			Repositories: []string{"ghcr.io/cilium-go/hubble-relay"},
			Spec: Spec{Binaries: map[string]string{"hubble-relay": "/usr/bin/hubble-relay"},
				Entrypoint: []string{"/usr/bin/hubble-relay"}, Cmd: []string{"serve"}},
		},
		{
			Repositories: []string{"ghcr.io/cilium-go/hubble-ui"},
			Spec: Spec{Binaries: map[string]string{"hubble-ui": "/usr/bin/hubble-ui"},
				Entrypoint: []string{"/usr/bin/hubble-ui"}},
		},
		{
			Repositories: []string{"docker.io/library/busybox", "docker.io/library/alpine",
				"docker.io/library/debian", "docker.io/library/ubuntu",
				e2e + "busybox", "registry.k8s.io/busybox",
				"quay.io/prometheus/busybox"},
			// The shell is the host's /bin/sh, visible through the pod root's overlays.
			Spec: Spec{Cmd: []string{"sh"}},
		},
		{
			Repositories: []string{e2e + "agnhost",
				"k8s.gcr.io/e2e-test-images/agnhost", "gcr.io/kubernetes-e2e-test-images/agnhost"},
			// The real image also carries CoreDNS at /coredns, which DNS tests run.
			Spec: Spec{Binaries: agnhost, Extras: map[string]string{"coredns": "/coredns"},
				Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}},
		},
		{
			Repositories: []string{"registry.k8s.io/pause", "k8s.gcr.io/pause"},
			Spec:         Spec{Binaries: agnhost, Entrypoint: []string{"/agnhost", "pause"}},
		},
		{
			// distroless with USER nonroot:nonroot (65532); the pod's network namespace
			// lets it bind port 53, as containerd's does.
			Repositories: []string{"registry.k8s.io/coredns/coredns", "docker.io/coredns/coredns",
				"k8s.gcr.io/coredns/coredns"},
			Spec: Spec{Binaries: map[string]string{"coredns": "/coredns"}, Entrypoint: []string{"/coredns"},
				User: ptr(int64(65532)), Group: ptr(int64(65532))},
		},
	}, append(e2eRules(), connectivityRules()...)...)
}

// e2eRules serve the e2e test images (k8s.io/kubernetes test/images, at the lab's
// release) that agnhost or the host's tools stand in for, each with the entrypoint
// and command its Dockerfile gives. Left out on purpose: images of programs the lab
// does not build (nonewprivs, resource-consumer, sample-apiserver, volume servers,
// node-perf, sample-device-plugin, apparmor-loader, etcd, distroless-iptables), and
// the private and invalid registries' images, which tests expect to fail to pull.
func e2eRules() []Rule {
	agnhost := map[string]string{"agnhost": "/agnhost"}
	return []Rule{
		{
			// agnhost with pictures to serve, CMD ["test-webserver"] (port 80, files
			// from /; the pictures themselves are not in the lab).
			Repositories: []string{e2e + "kitten", e2e + "nautilus"},
			Spec:         Spec{Binaries: agnhost, Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}},
		},
		{
			// nginx as e2e tests use it: an HTTP server on port 80. agnhost's
			// test-webserver is one; nginx's configuration is not.
			Repositories: []string{e2e + "nginx"},
			Spec:         Spec{Binaries: agnhost, Entrypoint: []string{"/agnhost", "test-webserver", "--port=80"}},
		},
		{
			// Debian with USER 1234 and no entrypoint: tests run their own commands.
			Repositories: []string{e2e + "nonroot"},
			Spec:         Spec{User: ptr(int64(1234))},
		},
		{
			// Alpine with util-linux's IPC tools (ipcmk, ipcs): the host's util-linux.
			Repositories: []string{e2e + "ipc-utils"},
			Spec:         Spec{Cmd: []string{"sh"}},
		},
		{
			// Debian with dnsutils and CoreDNS at /coredns; CMD bash.
			Repositories: []string{e2e + "glibc-dns-testing"},
			Spec:         Spec{Extras: map[string]string{"coredns": "/coredns"}, Cmd: []string{"bash"}},
		},
		{
			// perl's image: CMD perl -de0. Debian's perl-base is always installed.
			Repositories: []string{e2e + "perl"},
			Spec:         Spec{Cmd: []string{"perl", "-de0"}},
		},
		{
			// A program of its own (test/images/regression-issue-74839), built
			// into the lab's bin directory like agnhost.
			Repositories: []string{e2e + "regression-issue-74839"},
			Spec: Spec{Binaries: map[string]string{"regression-issue-74839": "/regression-issue-74839"},
				Entrypoint: []string{"/regression-issue-74839"}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// Resolve returns what a container of image ref runs, or an error wrapping ErrUnknown.
func (c *Catalog) Resolve(ref string) (Image, error) {
	repo, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	for i := len(c.rules) - 1; i >= 0; i-- {
		r := c.rules[i]
		if !r.matches(repo) {
			continue
		}
		img := Image{
			Ref:        ref,
			Repository: repo,
			Entrypoint: append([]string(nil), r.Spec.Entrypoint...),
			Cmd:        append([]string(nil), r.Spec.Cmd...),
			User:       r.Spec.User,
			Group:      r.Spec.Group,
			WorkingDir: r.Spec.WorkingDir,
			ID:         "lab://" + repo,
		}
		for _, name := range slices.Sorted(maps.Keys(r.Spec.Binaries)) {
			img.Files = append(img.Files, File{Host: filepath.Join(c.binDir, name), Path: r.Spec.Binaries[name]})
		}
		for _, name := range slices.Sorted(maps.Keys(r.Spec.Extras)) {
			img.Files = append(img.Files, File{Host: filepath.Join(c.binDir, name), Path: r.Spec.Extras[name], Optional: true})
		}
		for _, path := range slices.Sorted(maps.Keys(r.Spec.Aliases)) {
			img.Files = append(img.Files, File{Host: filepath.Join(c.binDir, r.Spec.Aliases[path]), Path: path, Optional: true})
		}
		return img, nil
	}
	return Image{}, fmt.Errorf("%s: %w", ref, ErrUnknown)
}

// Normalize returns the repository of an image reference the way container runtimes
// spell it: the tag and digest dropped, Docker Hub names completed with docker.io and
// library/.
func Normalize(ref string) (string, error) {
	name := ref
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	// A colon after the last slash starts the tag; one before it is a registry port.
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	if name == "" || strings.ContainsAny(name, " \t\n") {
		return "", fmt.Errorf("invalid image reference %q", ref)
	}
	name = strings.ToLower(name)
	first, rest, hasSlash := strings.Cut(name, "/")
	isRegistry := hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost")
	switch {
	case isRegistry:
		if first == "index.docker.io" {
			name = "docker.io/" + rest
		}
	case hasSlash:
		name = "docker.io/" + name
	default:
		name = "docker.io/library/" + name
	}
	if strings.HasPrefix(name, "docker.io/") && strings.Count(name, "/") == 1 {
		name = "docker.io/library/" + strings.TrimPrefix(name, "docker.io/")
	}
	return name, nil
}
