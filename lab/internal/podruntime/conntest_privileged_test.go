package podruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The images of Cilium's connectivity test, as cilium-cli's defaults name them.
const (
	curlImage        = "quay.io/cilium/alpine-curl:v1.10.0@sha256:913e8c9f3d960dde03882defa0edd3a919d529c2eb167caa7f54194528bde364"
	jsonMockImage    = "quay.io/cilium/json-mock:v1.4.1@sha256:6a66df90808a39c02e7a9d58af7bf0e54d8f8b7d4bc528f48c891969a7049195"
	dnsTestImage     = "registry.k8s.io/coredns/coredns:v1.14.6@sha256:900f9c109f7a33545d3c811516e8376df9019147b750f5ce3e254468769176ea"
	connDisruptImage = "quay.io/cilium/test-connection-disruption:v0.0.17@sha256:62374cfd0e87e6541244331ccf477a21c527c3eefa9d841b97af79996939be0c"
	socatImage       = "docker.io/alpine/socat:1.8.1.3@sha256:f134cb7ebb983f971f5deb44e92bc62c1385b0a3b525393f32dd0722acc30315"
	networkPerfImage = "quay.io/cilium/network-perf:3.21-1782913202-88c270c@sha256:c115a00b80bbf4ff49857dd545f0c40025f226d79051b2c8fdab3e8b938c7f92"
)

// needBinaries skips unless the lab's bin directory has the named stand-ins.
func needBinaries(t *testing.T, names ...string) {
	t.Helper()
	dir := agnhostDir(t)
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Skipf("%s not built: run make build-lab", n)
		}
	}
}

// podsForward lets the test's node namespace route between its pods, as a node
// does (it is the test's own namespace, not the machine's).
func podsForward(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// curlClientPod is the suite's client Deployment's pod: alpine-curl running
// /usr/bin/pause.
func curlClientPod(name string) *corev1.Pod {
	return newPod(name, func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "client", Image: curlImage, Command: []string{"/usr/bin/pause"}}}
	})
}

// TestPrivilegedConnectivityEchoAndClient runs the suite's echo pod (json-mock on
// 8080 with the CoreDNS DNS test server beside it, each with its readiness
// probe) and client pod (alpine-curl running pause), and runs from the client
// the commands the suite runs: curl with its -w format, nslookup and dig against
// the DNS test server, ping, ip.
func TestPrivilegedConnectivityEchoAndClient(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	needBinaries(t, "pause", "json-mock", "coredns")
	podsForward(t)
	// The suite's configmap, verbatim (tabs and all).
	corefile := ". {\n\t\t\t\tlocal\n\t\t\t\tready\n\t\t\t\tlog\n\t\t\t}"
	env := newTestEnv(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns-configmap", Namespace: "default"},
		Data: map[string]string{"Corefile": corefile}})
	rt := env.rt
	echo := newPod("echo-same-node", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "coredns-config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "coredns-configmap"}}}}}
		p.Spec.Containers = []corev1.Container{
			{
				Name: "echo-same-node", Image: jsonMockImage,
				Ports: []corev1.ContainerPort{{Name: "http-8080", ContainerPort: 8080}},
				Env:   []corev1.EnvVar{{Name: "PORT", Value: "8080"}, {Name: "NAMED_PORT", Value: "http-8080"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			},
			{
				Name: "dns-test-server", Image: dnsTestImage,
				Args: []string{"-conf", "/etc/coredns/Corefile"},
				Ports: []corev1.ContainerPort{{Name: "dns-53", ContainerPort: 53},
					{Name: "dns-udp-53", ContainerPort: 53, Protocol: corev1.ProtocolUDP}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/ready", Port: intstr.FromInt32(8181)}}, PeriodSeconds: 1},
				VolumeMounts: []corev1.VolumeMount{{Name: "coredns-config-volume", MountPath: "/etc/coredns", ReadOnly: true}},
			},
		}
	})
	client := curlClientPod("client")
	for _, p := range []*corev1.Pod{echo, client} {
		if err := rt.CreatePod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	echoIP := waitPod(t, rt, echo, "Ready", podReady).Status.PodIP
	clientIP := waitPod(t, rt, client, "running", func(p *corev1.Pod) bool {
		return containerStatus(p, "client").State.Running != nil
	}).Status.PodIP

	curl := func(path string, extra ...string) (string, error) {
		// CurlCommand of cilium-cli's check/context.go.
		argv := append([]string{"curl", "--silent", "--fail", "--show-error", "--connect-timeout", "2", "--max-time", "10"}, extra...)
		return execIn(t, rt, client, "client", append(argv, "http://"+echoIP+":8080"+path)...)
	}
	wform := []string{"-w", "%{local_ip}:%{local_port} -> %{remote_ip}:%{remote_port} = %{response_code}\n", "--output", "/dev/null"}
	for _, path := range []string{"/", "/public", "/private"} {
		out, err := curl(path, wform...)
		if want := regexp.MustCompile(`^` + regexp.QuoteMeta(clientIP) + `:\d+ -> ` + regexp.QuoteMeta(echoIP) + `:8080 = 200\n$`); err != nil || !want.MatchString(out) {
			t.Errorf("curl %s: %v, %q", path, err, out)
		}
	}
	if out, err := curl("/public"); err != nil || !strings.Contains(out, `"body": "public information"`) {
		t.Errorf("GET /public: %v %q", err, out)
	}
	// The middleware: the egress gateway tests read the client's address.
	out, err := curl("/client-ip")
	var ip struct {
		ClientIP string `json:"client-ip"`
	}
	if err != nil || json.Unmarshal([]byte(out), &ip) != nil {
		t.Fatalf("GET /client-ip: %v %q", err, out)
	}
	if a, err := netip.ParseAddr(ip.ClientIP); err != nil || a.Unmap().String() != clientIP {
		t.Errorf("client-ip %q, want %s", ip.ClientIP, clientIP)
	}
	if out, err := curl("/hostname"); err != nil || !strings.Contains(out, `"hostname": "echo-same-node"`) {
		t.Errorf("GET /hostname: %v %q", err, out)
	}
	// Without the header curl --fail exits 22, which the suite expects of a
	// refused request; with it, the records.
	if out, err := curl("/auth-header-required"); exitCode(err) != 22 || !strings.Contains(out, "401") {
		t.Errorf("GET /auth-header-required without the header: exit %d %q", exitCode(err), out)
	}
	if out, err := curl("/auth-header-required", "-H", "Authorization: Bearer 123456"); err != nil || !strings.Contains(out, "super secret information") {
		t.Errorf("GET /auth-header-required with the header: %v %q", err, out)
	}
	if out, err := curl("/nothing-here"); exitCode(err) != 22 {
		t.Errorf("GET /nothing-here: exit %d %q", exitCode(err), out)
	}

	// CoreDNS runs as its image's user, and may bind port 53 in the pod's own
	// network namespace, as containerd lets it.
	if out := mustExec(t, rt, echo, "dns-test-server", "sh", "-c", "echo $(id -u):$(id -g)"); strings.TrimSpace(out) != "65532:65532" {
		t.Errorf("the DNS test server runs as %q, want the image's nonroot:nonroot, 65532:65532", out)
	}
	if out := mustExec(t, rt, client, "client", "cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start"); strings.TrimSpace(out) != "0" {
		t.Errorf("ip_unprivileged_port_start in a pod: %q, want 0", out)
	}
	// WaitForPodDNS: nslookup of a local name against the DNS test server.
	if out, err := execIn(t, rt, client, "client", "nslookup", "localhost", echoIP); err != nil || !strings.Contains(out, "127.0.0.1") {
		t.Errorf("nslookup localhost %s: %v\n%s", echoIP, err, out)
	}
	if out, err := execIn(t, rt, client, "client", "dig", "+time=2", "localhost", "@"+echoIP); err != nil ||
		!regexp.MustCompile(`localhost\.\s+\d+\s+IN\s+A\s+127\.0\.0\.1`).MatchString(out) {
		t.Errorf("dig localhost @%s: %v\n%s", echoIP, err, out)
	}
	// The log plugin logs the query.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(readLogs(t, rt, echo, "dns-test-server", api.ContainerLogOpts{}), `"A IN localhost.`) {
		if time.Now().After(deadline) {
			t.Fatalf("the DNS test server did not log the query:\n%s", readLogs(t, rt, echo, "dns-test-server", api.ContainerLogOpts{}))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// PingCommand, and the address lookup the suite runs with ip.
	if out, err := execIn(t, rt, client, "client", "ping", "-c", "1", "-W", "2", echoIP); err != nil || !strings.Contains(out, "1 received") {
		t.Errorf("ping: %v\n%s", err, out)
	}
	if out, err := execIn(t, rt, client, "client", "/bin/sh", "-c",
		"ip -family inet -oneline address show dev eth0 scope global | awk '{print $4}' | cut -d/ -f1"); err != nil || strings.TrimSpace(out) != clientIP {
		t.Errorf("ip address: %v %q", err, out)
	}
	// The sniffer's tcpdump, as cilium-cli starts it in a pod (to a file, in
	// the background), catches the pod's ping.
	sniff := "timeout 20 tcpdump -i eth0 -c 1 --immediate-mode -U -w /tmp/sniff.pcap 'icmp' > /tmp/sniff.log 2>&1 & " +
		"pid=$!; for i in $(seq 1 50); do grep -q 'listening on' /tmp/sniff.log && break; sleep 0.1; done; " +
		"ping -c 1 -W 2 " + echoIP + " >/dev/null; wait $pid; cat /tmp/sniff.log; stat -c 'pcap %s bytes' /tmp/sniff.pcap"
	if out, err := execIn(t, rt, client, "client", "sh", "-c", sniff); err != nil || !strings.Contains(out, "1 packet captured") {
		t.Errorf("tcpdump in the client pod: %v\n%s", err, out)
	}
	// patchDeployment adds a CA to the client's bundle: the pod's /etc is its
	// own, the machine's stays as it was.
	hostBundle, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	mustExec(t, rt, client, "client", "sh", "-c", "echo LAB-TEST-CA | base64 >/tmp/ca; base64 -d /tmp/ca >> /etc/ssl/certs/ca-certificates.crt")
	if out := mustExec(t, rt, client, "client", "tail", "-n", "1", "/etc/ssl/certs/ca-certificates.crt"); strings.TrimSpace(out) != "LAB-TEST-CA" {
		t.Errorf("the pod's CA bundle ends with %q", out)
	}
	if after, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); string(after) != string(hostBundle) {
		t.Error("a pod's write to /etc/ssl/certs reached the machine's file")
	}
	// The request log of json-server.
	if logs := readLogs(t, rt, echo, "echo-same-node", api.ContainerLogOpts{}); !strings.Contains(logs, "GET /public 200") {
		t.Errorf("json-mock logs lack the requests:\n%s", logs)
	}

	// pause ends on SIGTERM: the pod goes away within its grace period.
	start := time.Now()
	if err := rt.DeletePod(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("deleting the client pod took %v: pause ignored SIGTERM?", d)
	}
}

// tcdPods are the suite's test-conn-disrupt server and client pods: the image's
// programs with the suite's arguments and exec readiness probes.
func tcdPods(protocol string) (server, client func(addr string) *corev1.Pod) {
	probe := func(file string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", file}}},
			PeriodSeconds: 1, FailureThreshold: 20}
	}
	server = func(string) *corev1.Pod {
		return newPod("tcd-server-"+protocol, func(p *corev1.Pod) {
			cmd := []string{"tcd-server", "8000"}
			if protocol != "" {
				cmd = []string{"tcd-server", "--protocol", protocol, "8000"}
			}
			p.Spec.Containers = []corev1.Container{{Name: "server", Image: connDisruptImage, Command: cmd,
				Ports: []corev1.ContainerPort{{ContainerPort: 8000}}, ReadinessProbe: probe("/tmp/server-ready")}}
		})
	}
	client = func(addr string) *corev1.Pod {
		return newPod("tcd-client-"+protocol, func(p *corev1.Pod) {
			cmd := []string{"tcd-client", "--dispatch-interval", "0s"}
			if protocol != "" {
				cmd = append(cmd, "--protocol", protocol)
			}
			p.Spec.Containers = []corev1.Container{{Name: "client", Image: connDisruptImage, Command: append(cmd, addr),
				ReadinessProbe: probe("/tmp/client-ready")}}
		})
	}
	return server, client
}

// TestPrivilegedConnDisruptImage: the client keeps its connection to the server
// without a restart while the path holds, and restarts once the server goes,
// which is what the suite's no-interrupted-connections check counts; over TCP
// (the default) and HTTP (the L7 variant).
func TestPrivilegedConnDisruptImage(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	needBinaries(t, "tcd-client", "tcd-server")
	podsForward(t)
	env := newTestEnv(t)
	rt := env.rt
	for _, protocol := range []string{"", "http"} {
		serverPod, clientPod := tcdPods(protocol)
		server := serverPod("")
		if err := rt.CreatePod(context.Background(), server); err != nil {
			t.Fatal(err)
		}
		serverIP := waitPod(t, rt, server, "Ready", podReady).Status.PodIP
		addr := serverIP + ":8000"
		if protocol == "http" {
			addr = "http://" + serverIP + ":8000/echo"
		}
		client := clientPod(addr)
		if err := rt.CreatePod(context.Background(), client); err != nil {
			t.Fatal(err)
		}
		waitPod(t, rt, client, "Ready", podReady)
		// Two seconds of replies counted in the client's log, no restart.
		rx := regexp.MustCompile(`Operations per second: tx \d+, rx [1-9]`)
		waitPod(t, rt, client, "replies for two seconds", func(p *corev1.Pod) bool {
			return len(rx.FindAllString(readLogs(t, rt, client, "client", api.ContainerLogOpts{}), -1)) >= 2
		})
		if n := containerStatus(waitPod(t, rt, client, "status", func(*corev1.Pod) bool { return true }), "client").RestartCount; n != 0 {
			t.Fatalf("%s client restarted %d times while its server ran", protocol, n)
		}
		// The server goes: the client exits and restarts.
		if err := rt.DeletePod(context.Background(), server); err != nil {
			t.Fatal(err)
		}
		p := waitPod(t, rt, client, "a restart", func(p *corev1.Pod) bool { return containerStatus(p, "client").RestartCount > 0 })
		t.Logf("%s client after its server went: %+v", protocol, containerStatus(p, "client").LastTerminationState.Terminated)
		if err := rt.DeletePod(context.Background(), client); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrivilegedSocatImage: the socat pods as the suite deploys them (sh -c
// sleep), the suite's receiver command line (a multicast membership on the
// pod's address) getting a datagram, and socat as its image's entrypoint
// forwarding a TCP stream.
func TestPrivilegedSocatImage(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	podsForward(t)
	env := newTestEnv(t)
	rt := env.rt
	server := newPod("socat-server", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "socat", Image: socatImage, Command: []string{"/bin/sh", "-c", "sleep 10000000"}}}
	})
	forwarder := newPod("socat-forwarder", func(p *corev1.Pod) {
		// The image's entrypoint is socat: args alone make a TCP echo.
		p.Spec.Containers = []corev1.Container{{Name: "socat", Image: socatImage,
			Args: []string{"TCP-LISTEN:7000,fork,reuseaddr", "EXEC:cat"}}}
	})
	client := newPod("socat-client", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "socat", Image: socatImage, Command: []string{"/bin/sh", "-c", "sleep 10000000"}}}
	})
	running := func(p *corev1.Pod) bool { return containerStatus(p, "socat").State.Running != nil }
	ips := map[string]string{}
	for _, p := range []*corev1.Pod{server, forwarder, client} {
		if err := rt.CreatePod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		ips[p.Name] = waitPod(t, rt, p, "running", running).Status.PodIP
	}

	// SocatServer1secCommand's receiver, and SocatClientCommand's sender
	// (to the receiver's address: the test's pod network routes no multicast).
	const msg = "Multicast test message"
	recv := make(chan string, 1)
	go func() {
		out, err := execIn(t, rt, server, "socat", strings.Fields(fmt.Sprintf(
			"timeout 5 socat STDIO UDP4-RECVFROM:6666,ip-add-membership=239.255.9.9:%s", ips["socat-server"]))...)
		recv <- fmt.Sprintf("%s (%v)", out, err)
	}()
	sender := fmt.Sprintf(`for i in $(seq 1 40); do echo "%s" | socat - UDP-DATAGRAM:%s:6666; sleep 0.1; done`, msg, ips["socat-server"])
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		execIn(t, rt, client, "socat", "/bin/sh", "-c", sender)
	}()
	if got := <-recv; !strings.Contains(got, msg) {
		t.Errorf("receiver got %q", got)
	}
	// KillMulticastTestSender.
	if out, err := execIn(t, rt, client, "socat", "pkill", "-f", msg); err != nil {
		t.Errorf("pkill the sender: %v %q", err, out)
	}
	<-sent

	out, err := execIn(t, rt, client, "socat", "/bin/sh", "-c",
		fmt.Sprintf("echo through-socat | socat -t 2 - TCP:%s:7000", ips["socat-forwarder"]))
	if err != nil || strings.TrimSpace(out) != "through-socat" {
		t.Errorf("TCP through socat: %v %q", err, out)
	}
}

// TestPrivilegedNetworkPerfImage: the suite's perf server (netserver -D) and
// client (bash -c sleep) pods, and from the client its netperf command lines,
// one stream and the _MULTI form (a bash loop of netperfs), parsed as the suite
// parses them.
func TestPrivilegedNetworkPerfImage(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	needBinaries(t, "netperf", "netserver")
	podsForward(t)
	env := newTestEnv(t)
	rt := env.rt
	server := newPod("perf-server", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "perf", Image: networkPerfImage, Command: []string{"netserver", "-D"},
			Ports: []corev1.ContainerPort{{Name: "netserver-ctrl", ContainerPort: 12865}}}}
	})
	client := newPod("perf-client", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "perf", Image: networkPerfImage, Command: []string{"/bin/bash", "-c", "sleep 10000000"}}}
	})
	running := func(p *corev1.Pod) bool { return containerStatus(p, "perf").State.Running != nil }
	ips := map[string]string{}
	for _, p := range []*corev1.Pod{server, client} {
		if err := rt.CreatePod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		ips[p.Name] = waitPod(t, rt, p, "running", running).Status.PodIP
	}
	// The image's WORKDIR, and its iperf3.
	if out := mustExec(t, rt, client, "perf", "pwd"); strings.TrimSpace(out) != "/netperf" {
		t.Errorf("working directory %q, want the image's /netperf", out)
	}
	if out := mustExec(t, rt, client, "perf", "iperf3", "--version"); !strings.Contains(out, "iperf 3") {
		t.Errorf("iperf3 --version: %q", out)
	}
	netperf := func(test string, extra ...string) string {
		return strings.Join(append([]string{"/usr/local/bin/netperf", "-H", ips["perf-server"], "-l", "1s", "-t", test, "--", "-R", "1",
			"-o", "MIN_LATENCY,MEAN_LATENCY,MAX_LATENCY,P50_LATENCY,P90_LATENCY,P99_LATENCY,TRANSACTION_RATE,THROUGHPUT,THROUGHPUT_UNITS"}, extra...), " ")
	}
	results := func(out string) [][]string {
		var rows [][]string
		for _, l := range strings.Split(out, "\n") {
			if l != "" && l[0] >= '0' && l[0] <= '9' {
				rows = append(rows, strings.Split(l, ","))
			}
		}
		return rows
	}
	rr := mustExec(t, rt, client, "perf", strings.Fields(netperf("TCP_RR"))...)
	if rows := results(rr); len(rows) != 1 || len(rows[0]) != 9 || rows[0][8] != "Trans/s" {
		t.Errorf("TCP_RR:\n%s", rr)
	} else if rate, err := strconv.ParseFloat(rows[0][6], 64); err != nil || rate <= 0 {
		t.Errorf("TCP_RR transaction rate %q", rows[0][6])
	}
	// NetperfCmd's form for TCP_STREAM_MULTI with two streams.
	multi := mustExec(t, rt, client, "perf", "/bin/bash", "-c", fmt.Sprintf(
		"DIR=$(mktemp -d); for i in {1..%d}; do %s > $DIR/out$i.out & done; wait; cat $DIR/*; rm -rf $DIR", 2, netperf("TCP_STREAM")))
	rows := results(multi)
	if len(rows) != 2 {
		t.Fatalf("TCP_STREAM_MULTI: want 2 result lines:\n%s", multi)
	}
	for _, r := range rows {
		if tput, err := strconv.ParseFloat(r[7], 64); len(r) != 9 || r[8] != "10^6bits/s" || err != nil || tput <= 0 {
			t.Errorf("TCP_STREAM result %q", r)
		}
	}
}
