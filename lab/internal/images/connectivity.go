package images

// connectivityRules serve the images that cilium-cli's `cilium connectivity test`
// deploys (its defaults: alpine-curl, json-mock, test-connection-disruption,
// alpine/socat, network-perf, Gateway API's echo-advanced; the DNS test server
// is the CoreDNS image above) and Cilium's getting-started demo (starwars),
// with the entrypoint, command, user and working directory of each real image.
// The tools the images install come from the host's /usr (hack/deps.sh installs
// the Debian packages); the programs of their own are stand-ins the lab builds
// (lab/cmd/standins), which speak what the suite expects of the real ones.
func connectivityRules() []Rule {
	return []Rule{
		{
			// Alpine with curl, iputils, bind-tools (dig, nslookup), tcpdump and
			// iproute2, and the pause binary at /usr/bin/pause, which the suite's
			// client pods run; ENTRYPOINT ["/usr/bin/curl"].
			Repositories: []string{"quay.io/cilium/alpine-curl"},
			Spec: Spec{Binaries: map[string]string{"pause": "/usr/bin/pause"},
				Entrypoint: []string{"/usr/bin/curl"}},
		},
		{
			// json-server with a small database and a middleware (/client-ip,
			// /hostname, /auth-header-required), on $PORT or 80; the real image's
			// ENTRYPOINT is bash /run.sh, which execs json-server with those
			// settings: here the stand-in is json-server and reads the same
			// variables. Debian's curl, iproute2 and dnsutils are what the
			// image installs besides.
			Repositories: []string{"quay.io/cilium/json-mock"},
			Spec: Spec{Binaries: map[string]string{"json-mock": "/usr/local/bin/json-server"},
				Entrypoint: []string{"/usr/local/bin/json-server"}},
		},
		{
			// busybox with tcd-client and tcd-server in /usr/bin; CMD ["sh"].
			Repositories: []string{"quay.io/cilium/test-connection-disruption"},
			Spec: Spec{Binaries: map[string]string{"tcd-client": "/usr/bin/tcd-client", "tcd-server": "/usr/bin/tcd-server"},
				Cmd: []string{"sh"}},
		},
		{
			// Alpine with socat: ENTRYPOINT ["socat"]. socat is Debian's.
			Repositories: []string{"docker.io/alpine/socat"},
			Spec:         Spec{Entrypoint: []string{"socat"}},
		},
		{
			// netperf and netserver built into /usr/local/bin on a UBI base,
			// CMD ["/bin/bash"], WORKDIR /netperf (the source tree, removed after
			// the build). Debian has no netperf in main: the lab's stand-ins
			// speak their own protocol between themselves and print what the
			// suite parses (-o selectors). iperf3, which the image also builds,
			// is Debian's, in /usr/bin.
			Repositories: []string{"quay.io/cilium/network-perf"},
			Spec: Spec{Binaries: map[string]string{"netperf": "/usr/local/bin/netperf", "netserver": "/usr/local/bin/netserver"},
				Cmd: []string{"/bin/bash"}, WorkingDir: "/netperf"},
		},
		{
			// The deathstar of Cilium's getting-started demo
			// (examples/minikube/http-sw-app.yaml): an HTTP API on port 80,
			// started by the image's entrypoint; the Deployment gives no
			// command. Its ships are json-mock pods.
			Repositories: []string{"quay.io/cilium/starwars", "docker.io/cilium/starwars"},
			Spec: Spec{Binaries: map[string]string{"starwars": "/usr/local/bin/deathstar"},
				Entrypoint: []string{"/usr/local/bin/deathstar"}},
		},
		{
			// Gateway API's conformance echo server, the l7-lb Deployment's image:
			// its Dockerfile is only FROM gcr.io/istio-release/app, whose
			// Dockerfile.app copies Istio's echo server to /usr/local/bin/server
			// (and its client to /usr/local/bin/client, which the suite does
			// not run) and sets ENTRYPOINT ["/usr/local/bin/server"]; the
			// Deployment gives only args. The image's /cert.crt and /cert.key
			// are not in the lab: the stand-in makes a certificate at start.
			Repositories: []string{"gcr.io/k8s-staging-gateway-api/echo-advanced"},
			Spec: Spec{Binaries: map[string]string{"echo-advanced": "/usr/local/bin/server"},
				Entrypoint: []string{"/usr/local/bin/server"}},
		},
	}
}
