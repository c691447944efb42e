package images

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The images of cilium-cli's connectivity test, as its defaults name them (tags
// and digests included), resolve to their stand-ins with the real images'
// entrypoint, command and working directory.
func TestResolveConnectivityTestImages(t *testing.T) {
	c := New("/lab/bin")
	for _, tc := range []struct {
		ref        string
		files      []File
		entrypoint []string
		cmd        []string
		workingDir string
		user       int64 // 0: none
	}{
		{ref: "quay.io/cilium/alpine-curl:v1.10.0@sha256:913e8c9f3d960dde03882defa0edd3a919d529c2eb167caa7f54194528bde364",
			files: []File{{"/lab/bin/pause", "/usr/bin/pause", false}}, entrypoint: []string{"/usr/bin/curl"}},
		{ref: "quay.io/cilium/json-mock:v1.4.1@sha256:6a66df90808a39c02e7a9d58af7bf0e54d8f8b7d4bc528f48c891969a7049195",
			files: []File{{"/lab/bin/json-mock", "/usr/local/bin/json-server", false}}, entrypoint: []string{"/usr/local/bin/json-server"}},
		{ref: "registry.k8s.io/coredns/coredns:v1.14.6@sha256:900f9c109f7a33545d3c811516e8376df9019147b750f5ce3e254468769176ea",
			files: []File{{"/lab/bin/coredns", "/coredns", false}}, entrypoint: []string{"/coredns"}, user: 65532},
		{ref: "quay.io/cilium/test-connection-disruption:v0.0.17@sha256:62374cfd0e87e6541244331ccf477a21c527c3eefa9d841b97af79996939be0c",
			files: []File{{"/lab/bin/tcd-client", "/usr/bin/tcd-client", false}, {"/lab/bin/tcd-server", "/usr/bin/tcd-server", false}},
			cmd:   []string{"sh"}},
		{ref: "docker.io/alpine/socat:1.8.1.3@sha256:f134cb7ebb983f971f5deb44e92bc62c1385b0a3b525393f32dd0722acc30315",
			entrypoint: []string{"socat"}},
		{ref: "alpine/socat", entrypoint: []string{"socat"}},
		{ref: "quay.io/cilium/network-perf:3.21-1782913202-88c270c@sha256:c115a00b80bbf4ff49857dd545f0c40025f226d79051b2c8fdab3e8b938c7f92",
			files: []File{{"/lab/bin/netperf", "/usr/local/bin/netperf", false}, {"/lab/bin/netserver", "/usr/local/bin/netserver", false}},
			cmd:   []string{"/bin/bash"}, workingDir: "/netperf"},
		{ref: "quay.io/cilium/starwars@sha256:896dc536ec505778c03efedb73c3b7b83c8de11e74264c8c35291ff6d5fe8ada",
			files: []File{{"/lab/bin/starwars", "/usr/local/bin/deathstar", false}}, entrypoint: []string{"/usr/local/bin/deathstar"}},
		{ref: "gcr.io/k8s-staging-gateway-api/echo-advanced:v20251204-v1.4.1",
			files: []File{{"/lab/bin/echo-advanced", "/usr/local/bin/server", false}}, entrypoint: []string{"/usr/local/bin/server"}},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			img, err := c.Resolve(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(img.Files, tc.files) || !slices.Equal(img.Entrypoint, tc.entrypoint) ||
				!slices.Equal(img.Cmd, tc.cmd) || img.WorkingDir != tc.workingDir ||
				(tc.user == 0) != (img.User == nil) || (img.User != nil && *img.User != tc.user) ||
				(tc.user == 0) != (img.Group == nil) || (img.Group != nil && *img.Group != tc.user) {
				t.Errorf("got files %v entrypoint %q cmd %q workdir %q user %v; want %v %q %q %q", img.Files, img.Entrypoint,
					img.Cmd, img.WorkingDir, img.User, tc.files, tc.entrypoint, tc.cmd, tc.workingDir)
			}
		})
	}
}

// The suite's optional images that the lab does not serve (FRR for the BGP
// tests) fail with an error naming them.
func TestConnectivityTestImagesLeftOut(t *testing.T) {
	c := New("/lab/bin")
	for _, ref := range []string{
		"quay.io/frrouting/frr:10.7.0@sha256:65e5967b922572c0565d968388fb06af69d7e9b3b3eea40ad7e3810687667f68",
	} {
		_, err := c.Resolve(ref)
		if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), ref) {
			t.Errorf("Resolve(%q): %v, want ErrUnknown naming the image", ref, err)
		}
	}
}
