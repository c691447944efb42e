package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	install "github.com/cilium-go/cilium/install/kubernetes"
	"github.com/cilium-go/cilium/pkg/cni"
	"github.com/cilium-go/cilium/pkg/cniconf"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
)

// fieldValues stand in for what the kubelet puts into env fieldRefs.
var fieldValues = map[string]string{
	"spec.nodeName": "node-1",
	"status.hostIP": "192.0.2.10",
}

// writeConfigDir writes files where the test's --config-dir points and
// returns args with --config-dir replaced.
func writeConfigDir(t *testing.T, files map[string]string, args []string) []string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return strings.HasPrefix(a, "--"+install.ConfigDirFlag+"=")
	})
	return append(out, "--"+install.ConfigDirFlag+"="+dir)
}

func agentPod(t *testing.T) (*corev1.PodSpec, *corev1.Container) {
	t.Helper()
	ds, err := install.Object[*appsv1.DaemonSet]("cilium")
	if err != nil {
		t.Fatal(err)
	}
	spec := &ds.Spec.Template.Spec
	for i := range spec.Containers {
		if spec.Containers[i].Name == "cilium-agent" {
			return spec, &spec.Containers[i]
		}
	}
	t.Fatal("no cilium-agent container")
	return nil, nil
}

// TestDaemonSetFlags runs the agent container's arguments and the
// cilium-config keys it mounts through the agent's real command line, and
// checks that the pod gives the agent what those flags point at.
func TestDaemonSetFlags(t *testing.T) {
	spec, c := agentPod(t)
	files, err := install.ConfigFiles(spec, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	args, err := install.Args(c, fieldValues)
	if err != nil {
		t.Fatal(err)
	}
	cmd := newCommand(Infrastructure, ControlPlane, Datapath, Observability)
	fs := cmd.Flags()
	if err := fs.Parse(writeConfigDir(t, files, args)); err != nil {
		t.Fatalf("agent flags: %v", err)
	}
	if err := install.ApplyConfigDir(fs, fs.Lookup(install.ConfigDirFlag).Value.String()); err != nil {
		t.Fatalf("cilium-config: %v", err)
	}
	want := map[string]string{"enable-k8s": "true", "k8s-node-name": "node-1", "node-ipv4": "192.0.2.10"}
	for k, v := range files {
		want[k] = v
	}
	// Values compare as the flag prints them.
	norm := newCommand(Infrastructure, ControlPlane, Datapath, Observability).Flags()
	for name, v := range want {
		if err := norm.Set(name, v); err != nil {
			t.Fatal(err)
		}
		if got, want := fs.Lookup(name).Value.String(), norm.Lookup(name).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}

	// The directories the flags name are the node's, at the same paths:
	// cilium-cni on the node dials the socket, pins outlive the pod.
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	flag := func(name string) string { return fs.Lookup(name).Value.String() }
	for name, dir := range map[string]string{"state-dir": flag("state-dir"),
		"socket-path": filepath.Dir(flag("socket-path")), "bpf-root": flag("bpf-root"),
		"write-cni-conf-when-ready": filepath.Dir(flag("write-cni-conf-when-ready"))} {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			within := dir == m.MountPath || strings.HasPrefix(dir, m.MountPath+"/")
			return within && hostPaths[m.Name] == m.MountPath
		}) {
			t.Errorf("--%s: %s is not the node's directory at the same path", name, dir)
		}
	}

	// The runtime finds the configuration in the node's directory and its
	// plugin the agent's socket through it.
	if got := hostPaths["etc-cni-netd"]; got != "/etc/cni/net.d" || !strings.HasPrefix(flag("write-cni-conf-when-ready"), got+"/") ||
		!strings.HasSuffix(flag("write-cni-conf-when-ready"), ".conflist") {
		t.Errorf("--write-cni-conf-when-ready %s: not a .conflist in the node's /etc/cni/net.d", flag("write-cni-conf-when-ready"))
	}
	b, err := cniconf.ConfList(flag("socket-path"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil || len(list.Plugins) != 1 {
		t.Fatalf("conflist %s: %v", b, err)
	}
	if conf, err := cni.ParseConf(list.Plugins[0].Bytes); err != nil || conf.SocketPath != flag("socket-path") {
		t.Errorf("conflist plugin %s: %+v %v", list.Plugins[0].Bytes, conf, err)
	}

	_, port, err := net.SplitHostPort(flag("prometheus-serve-addr"))
	if err != nil {
		t.Fatal(err)
	}
	// Liveness (and startup) ask whether the agent is wedged; readiness
	// whether a module is degraded. A degraded module must never restart
	// the agent.
	for _, probe := range []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		p := probe.p
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != probe.path || strconv.Itoa(p.HTTPGet.Port.IntValue()) != port {
			t.Errorf("%s probe %+v: want GET %s on port %s", probe.name, p, probe.path, port)
		}
	}
}

// TestCommandReadsConfigDir: values from --config-dir reach the cells (a
// bad one stops startup naming its flag); a file naming no flag stops it.
func TestCommandReadsConfigDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"bad value reaches the cell", map[string]string{"prometheus-serve-addr": "x:99999"}, `--prometheus-serve-addr "x:99999"`},
		{"unknown key", map[string]string{"tunnel-prot": "1"}, "tunnel-prot names no flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.DeleteFunc(baseArgs(t.TempDir()), func(a string) bool {
				return strings.HasPrefix(a, "--prometheus-serve-addr")
			})
			cmd := newCommand(Infrastructure, ControlPlane, memDatapathCell(endpointtest.NewDatapath()))
			var out strings.Builder
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(writeConfigDir(t, tc.files, args))
			if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %s", err, tc.wantErr)
			}
		})
	}
}
