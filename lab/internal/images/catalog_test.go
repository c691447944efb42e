package images

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	cases := map[string]string{
		"busybox":          "docker.io/library/busybox",
		"busybox:1.36":     "docker.io/library/busybox",
		"library/alpine:3": "docker.io/library/alpine",
		"docker.io/alpine": "docker.io/library/alpine",
		"index.docker.io/library/alpine@sha256:ab":     "docker.io/library/alpine",
		"coredns/coredns:1.11":                         "docker.io/coredns/coredns",
		"registry.k8s.io/e2e-test-images/agnhost:2.53": "registry.k8s.io/e2e-test-images/agnhost",
		"localhost:5000/foo/bar:v1":                    "localhost:5000/foo/bar",
		"localhost/foo":                                "localhost/foo",
		"Registry.K8s.io/Pause:3.10":                   "registry.k8s.io/pause",
	}
	for in, want := range cases {
		got, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ":tag", "a b"} {
		if _, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) succeeded", bad)
		}
	}
}

func TestResolveDefaults(t *testing.T) {
	c := New("/lab/bin")
	cases := []struct {
		ref        string
		files      []File
		entrypoint []string
		cmd        []string
	}{
		{"registry.k8s.io/e2e-test-images/agnhost:2.53", agnhostFiles, []string{"/agnhost"}, []string{"pause"}},
		{"registry.k8s.io/e2e-test-images/agnhost:any-tag", agnhostFiles, []string{"/agnhost"}, []string{"pause"}},
		{"registry.k8s.io/pause:3.10", []File{{"/lab/bin/agnhost", "/agnhost", false}}, []string{"/agnhost", "pause"}, nil},
		{"registry.k8s.io/coredns/coredns:v1.12.0", []File{{"/lab/bin/coredns", "/coredns", false}}, []string{"/coredns"}, nil},
		{"busybox", nil, nil, []string{"sh"}},
		{"ghcr.io/cilium-go/cilium:dev", []File{{"/lab/bin/cilium-agent", "/usr/bin/cilium-agent", false},
			{"/lab/bin/cilium-cni", "/usr/bin/cilium-cni", false}, {"/lab/bin/cilium-dbg", "/usr/bin/cilium-dbg", false},
			{"/lab/bin/cilium-proxy", "/usr/bin/cilium-proxy", false},
			{"/lab/bin/cilium-health", "/usr/bin/cilium-health", true}, {"/lab/bin/hubble", "/usr/bin/hubble", true},
			// cilium-dbg's old name.
			{"/lab/bin/cilium-dbg", "/usr/bin/cilium", true}}, nil, []string{"/usr/bin/cilium-agent"}},
		{"ghcr.io/cilium-go/hubble-relay:v1", []File{{"/lab/bin/hubble-relay", "/usr/bin/hubble-relay", false}},
			[]string{"/usr/bin/hubble-relay"}, []string{"serve"}},
		{"ghcr.io/cilium-go/hubble-ui:dev", []File{{"/lab/bin/hubble-ui", "/usr/bin/hubble-ui", false}},
			[]string{"/usr/bin/hubble-ui"}, nil},
		{"alpine:3.20", nil, nil, []string{"sh"}},
	}
	for _, tc := range cases {
		img, err := c.Resolve(tc.ref)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", tc.ref, err)
		}
		if img.Ref != tc.ref || !slices.Equal(img.Files, tc.files) ||
			!slices.Equal(img.Entrypoint, tc.entrypoint) || !slices.Equal(img.Cmd, tc.cmd) {
			t.Errorf("Resolve(%q) = %+v", tc.ref, img)
		}
	}
}

var agnhostFiles = []File{{"/lab/bin/agnhost", "/agnhost", false}, {"/lab/bin/coredns", "/coredns", true}}

// Every image of the pinned release's e2e manifest (test/utils/image/manifest.go)
// is either served, as its Dockerfile runs it, or left out on purpose.
func TestResolveE2EImages(t *testing.T) {
	c := New("/lab/bin")
	agnhost := []File{{"/lab/bin/agnhost", "/agnhost", false}}
	for _, tc := range []struct {
		ref        string
		files      []File
		entrypoint []string
		cmd        []string
		user       int64 // 0: none
	}{
		{ref: "registry.k8s.io/e2e-test-images/agnhost:2.66.1", files: agnhostFiles, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}},
		{ref: "registry.k8s.io/e2e-test-images/agnhost:2.55", files: agnhostFiles, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}},
		{ref: "registry.k8s.io/e2e-test-images/busybox:1.37.0-2", cmd: []string{"sh"}},
		{ref: "registry.k8s.io/pause:3.10.2", files: agnhost, entrypoint: []string{"/agnhost", "pause"}},
		{ref: "registry.k8s.io/e2e-test-images/kitten:1.8", files: agnhost, entrypoint: []string{"/agnhost"}, cmd: []string{"test-webserver"}},
		{ref: "registry.k8s.io/e2e-test-images/nautilus:1.8", files: agnhost, entrypoint: []string{"/agnhost"}, cmd: []string{"test-webserver"}},
		{ref: "registry.k8s.io/e2e-test-images/nginx:1.27.0-2", files: agnhost, entrypoint: []string{"/agnhost", "test-webserver", "--port=80"}},
		{ref: "registry.k8s.io/e2e-test-images/nginx:1.28.0-2", files: agnhost, entrypoint: []string{"/agnhost", "test-webserver", "--port=80"}},
		{ref: "registry.k8s.io/e2e-test-images/nonroot:1.5", user: 1234},
		{ref: "registry.k8s.io/e2e-test-images/ipc-utils:1.4", cmd: []string{"sh"}},
		{ref: "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1", files: []File{{"/lab/bin/coredns", "/coredns", true}}, cmd: []string{"bash"}},
		{ref: "registry.k8s.io/e2e-test-images/perl:5.26", cmd: []string{"perl", "-de0"}},
		{ref: "registry.k8s.io/e2e-test-images/regression-issue-74839:1.5",
			files: []File{{"/lab/bin/regression-issue-74839", "/regression-issue-74839", false}}, entrypoint: []string{"/regression-issue-74839"}},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			img, err := c.Resolve(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(img.Files, tc.files) || !slices.Equal(img.Entrypoint, tc.entrypoint) || !slices.Equal(img.Cmd, tc.cmd) {
				t.Errorf("got files %v entrypoint %q cmd %q; want %v %q %q", img.Files, img.Entrypoint, img.Cmd, tc.files, tc.entrypoint, tc.cmd)
			}
			if (tc.user == 0) != (img.User == nil) || (img.User != nil && *img.User != tc.user) {
				t.Errorf("user %v, want %d", img.User, tc.user)
			}
		})
	}
	for _, ref := range []string{
		// Tests expect these to fail to pull.
		"gcr.io/k8s-authenticated-test/agnhost:2.6", "invalid.registry.k8s.io/invalid/alpine:3.1",
		// Programs the lab does not build.
		"registry.k8s.io/e2e-test-images/nonewprivs:1.4", "registry.k8s.io/e2e-test-images/resource-consumer:1.14",
		"registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2", "registry.k8s.io/etcd:3.7.0-0",
	} {
		if _, err := c.Resolve(ref); !errors.Is(err, ErrUnknown) {
			t.Errorf("Resolve(%q): %v, want ErrUnknown", ref, err)
		}
	}
}

func TestResolveUnknown(t *testing.T) {
	_, err := New("/bin").Resolve("quay.io/someone/thing:v1")
	if !errors.Is(err, ErrUnknown) {
		t.Fatalf("err = %v, want ErrUnknown", err)
	}
	if want := "quay.io/someone/thing:v1"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name the image", err)
	}
}

func TestRegisterOverridesAndPrefix(t *testing.T) {
	c := New("/b")
	c.Register(Rule{
		Prefix: "ghcr.io/example/",
		Spec: Spec{
			Binaries:   map[string]string{"cilium-agent": "/usr/bin/cilium-agent", "cilium-dbg": "/usr/bin/cilium-dbg"},
			Entrypoint: nil, Cmd: []string{"cilium-agent"},
		},
	})
	c.Register(Rule{Repositories: []string{"docker.io/library/busybox"}, Spec: Spec{Cmd: []string{"true"}}})

	img, err := c.Resolve("ghcr.io/example/cilium:latest")
	if err != nil {
		t.Fatal(err)
	}
	want := []File{{"/b/cilium-agent", "/usr/bin/cilium-agent", false}, {"/b/cilium-dbg", "/usr/bin/cilium-dbg", false}}
	if !slices.Equal(img.Files, want) {
		t.Errorf("files = %v, want %v", img.Files, want)
	}
	img, err = c.Resolve("busybox:1")
	if err != nil || !slices.Equal(img.Cmd, []string{"true"}) {
		t.Errorf("override not applied: %+v %v", img, err)
	}
	// Resolve hands out copies: changing one result must not change the catalog.
	img.Cmd[0] = "changed"
	again, _ := c.Resolve("busybox")
	if again.Cmd[0] != "true" {
		t.Errorf("catalog mutated through a result")
	}
}
