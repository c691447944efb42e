package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cilium-go/cilium/lab/internal/pki"
	"github.com/cilium-go/cilium/lab/internal/proc"
)

const (
	agentNode = "install-agent"
	agentPod  = "install-pod"
	// agentPodCIDR is what the operator would have written into the node's
	// CiliumNode; the agent takes its pod addresses from there.
	agentPodCIDR = "10.0.77.0/24"
)

// checkAgentAsServiceAccount runs the built cilium-agent in the control
// plane's network namespace as the DaemonSet runs it on a node: with the
// cilium-config keys its pod mounts, its probe port and no more rights than
// the cilium ServiceAccount (the admin kubeconfig impersonating it). Then
// cilium-cni adds a pod as a runtime would: the agent must take the pod's address from the
// node's CiliumNode, allocate the pod's CiliumIdentity and publish its
// CiliumEndpoint, and delete the endpoint when the pod's network goes.
// The CNI configuration is the one the agent writes when ready.
func checkAgentAsServiceAccount(t *testing.T, ctx context.Context, cfg Config, ic *installClient, objs []*unstructured.Unstructured) {
	agent, plugin := filepath.Join(cfg.BinDir, "cilium-agent"), filepath.Join(cfg.BinDir, "cilium-cni")
	for _, b := range []string{agent, plugin} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built (make build-cilium): %v", filepath.Base(b), err)
		}
	}
	dir := t.TempDir()
	kubeconfig := impersonatingKubeconfig(t, AdminKubeconfig(cfg), dir, "kube-system", "cilium")
	configDir, settings := configDirOf(t, dir, objs, "DaemonSet", "cilium")
	// The node's CNI directory is the test's: rewrite the key rather than
	// override it, so the host's is safe whatever the precedence.
	conflist := filepath.Join(dir, "net.d", "05-cilium.conflist")
	if _, ok := settings["write-cni-conf-when-ready"]; !ok {
		t.Fatal("the DaemonSet's cilium-config has no write-cni-conf-when-ready")
	}
	if err := os.WriteFile(filepath.Join(configDir, "write-cni-conf-when-ready"), []byte(conflist), 0o644); err != nil {
		t.Fatal(err)
	}
	// The pod mounts Hubble's server certificate from the Secret the
	// operator issues; here the test issues one, where the keys say.
	hubbleDir := filepath.Join(dir, "hubble-tls")
	hubbleCA, err := pki.NewCA("install test hubble CA")
	if err == nil {
		err = hubbleCA.Save(hubbleDir)
	}
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := hubbleCA.Issue(pki.Request{CommonName: "*.default.hubble-grpc.cilium.io",
		DNSNames: []string{"*.default.hubble-grpc.cilium.io"}, Usage: pki.ServerAuth})
	if err != nil {
		t.Fatal(err)
	}
	hubbleFiles := map[string]string{"hubble-tls-cert-file": filepath.Join(hubbleDir, "server.crt"),
		"hubble-tls-key-file": filepath.Join(hubbleDir, "server.key"), "hubble-tls-client-ca-files": filepath.Join(hubbleDir, pki.CACertFile)}
	if err := pki.WriteKeyPair(hubbleFiles["hubble-tls-cert-file"], hubbleFiles["hubble-tls-key-file"], serverCert); err != nil {
		t.Fatal(err)
	}
	for key, path := range hubbleFiles {
		if _, ok := settings[key]; !ok {
			t.Fatalf("the DaemonSet's cilium-config has no %s", key)
		}
		if err := os.WriteFile(filepath.Join(configDir, key), []byte(path), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port := agentProbePort(t, objs)
	bpf := mountBPFFS(t, filepath.Join(dir, "bpffs"))
	sock := filepath.Join(dir, "run", "cilium.sock")

	// The node, its CiliumNode with a pod CIDR, and a pod scheduled there
	// (the default ServiceAccount is the controller manager's job, which
	// does not run here).
	cidr := netip.MustParsePrefix(agentPodCIDR)
	seed := []*unstructured.Unstructured{
		object("v1", "Node", "", agentNode, nil),
		object("cilium.io/v2", "CiliumNode", "", agentNode, map[string]any{
			"spec": map[string]any{"ipam": map[string]any{"podCIDRs": []any{agentPodCIDR}}}}),
		object("v1", "ServiceAccount", "default", "default", nil),
		object("v1", "Pod", "default", agentPod, map[string]any{"spec": map[string]any{
			"nodeName":   agentNode,
			"containers": []any{map[string]any{"name": "c", "image": "registry.k8s.io/pause:3.10"}}}}),
	}
	seed[3].SetLabels(map[string]string{"app": "install-test"})
	for _, o := range seed {
		if err := ic.ApplyObject(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}
	// The agent knows its CiliumEndpoints by the node's InternalIP, which
	// a kubelet would report.
	status, err := object("v1", "Node", "", agentNode, map[string]any{"status": map[string]any{
		"addresses": []any{map[string]any{"type": "InternalIP", "address": nodeIP(cfg)}}}}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ic.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}).Patch(ctx, agentNode,
		types.ApplyPatchType, status, metav1.PatchOptions{FieldManager: installFieldManager, Force: new(true)}, "status")
	if err != nil {
		t.Fatal(err)
	}

	logFile := filepath.Join(dir, "cilium-agent.log")
	addr := nodeIP(cfg) + ":" + strconv.Itoa(port)
	start(t, proc.Spec{Name: "cilium-agent", Path: agent, Dir: dir, Namespaces: cfg.Namespaces, LogFile: logFile,
		Args: []string{"--config-dir=" + configDir, "--enable-k8s", "--kubeconfig=" + kubeconfig,
			"--k8s-node-name=" + agentNode, "--node-ipv4=" + nodeIP(cfg), "--uplink=uplink0",
			"--state-dir=" + filepath.Join(dir, "state"), "--socket-path=" + sock, "--bpf-root=" + bpf,
			"--prometheus-serve-addr=" + addr}})
	refuseForbidden(t, "cilium-agent", logFile)

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialerIn(cfg.Namespaces.Net)}}
	eventually(t, 90*time.Second, "agent /healthz, the DaemonSet's probe", func() error {
		resp, err := hc.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})

	// The configuration appears once the agent serves CNI, as a runtime
	// waits for it.
	eventually(t, 60*time.Second, "CNI configuration written by the agent", func() error {
		_, err := os.Stat(conflist)
		return err
	})
	conf := cniConf(t, conflist)
	podNS := podNetns(t)
	const containerID = "install-test-container"
	out, err := runCNI(cfg, plugin, "ADD", containerID, podNS, conf)
	if err != nil {
		t.Fatalf("CNI ADD: %v", err)
	}
	var result struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(out, &result); err != nil || len(result.IPs) != 1 {
		t.Fatalf("CNI ADD result %s: %v", out, err)
	}
	if p, err := netip.ParsePrefix(result.IPs[0].Address); err != nil || !cidr.Contains(p.Addr()) {
		t.Errorf("pod address %s is not from the CiliumNode's %s (%v)", result.IPs[0].Address, cidr, err)
	}

	var id int64
	eventually(t, 60*time.Second, "CiliumEndpoint of the pod with an identity", func() error {
		cep, err := ic.dyn.Resource(ciliumEndpoints).Namespace("default").Get(ctx, agentPod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if id, _, _ = unstructured.NestedInt64(cep.Object, "status", "identity", "id"); id == 0 {
			return fmt.Errorf("no identity: %v", cep.Object["status"])
		}
		return nil
	})
	if _, err := ic.dyn.Resource(ciliumIdentities).Get(ctx, strconv.FormatInt(id, 10), metav1.GetOptions{}); err != nil {
		t.Errorf("CiliumIdentity %d of the endpoint: %v", id, err)
	}

	if out, err := runCNI(cfg, plugin, "DEL", containerID, podNS, conf); err != nil {
		t.Fatalf("CNI DEL: %v: %s", err, out)
	}
	eventually(t, 60*time.Second, "CiliumEndpoint of the deleted pod network removed", func() error {
		_, err := ic.dyn.Resource(ciliumEndpoints).Namespace("default").Get(ctx, agentPod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
	})
}

func object(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range fields {
		o.Object[k] = v
	}
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

// nodeIP is the control plane's address, standing in for the node's.
func nodeIP(cfg Config) string { return cfg.AdvertiseIP.String() }

// agentProbePort is the port of the DaemonSet's readiness probe.
func agentProbePort(t *testing.T, objs []*unstructured.Unstructured) int {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			port, ok, _ := unstructured.NestedInt64(c.(map[string]any), "readinessProbe", "httpGet", "port")
			if ok {
				return int(port)
			}
		}
	}
	t.Fatal("no readiness probe port in the DaemonSet")
	return 0
}

// cniConf is the plugin's network configuration from the list the agent
// wrote, as a runtime hands it to the plugin.
func cniConf(t *testing.T, conflist string) []byte {
	t.Helper()
	data, err := os.ReadFile(conflist)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(data, &list); err != nil || len(list.Plugins) != 1 {
		t.Fatalf("conflist %s: %v", data, err)
	}
	conf := list.Plugins[0]
	conf["cniVersion"], conf["name"] = list.CNIVersion, list.Name
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runCNI runs the plugin as a runtime does, from the node's network
// namespace, for the test pod.
func runCNI(cfg Config, plugin, command, containerID, podNS string, conf []byte) ([]byte, error) {
	cmd := exec.Command("nsenter", "--net="+cfg.Namespaces.Net, "--", plugin)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND=" + command, "CNI_CONTAINERID=" + containerID,
		"CNI_NETNS=" + podNS, "CNI_IFNAME=eth0", "CNI_PATH=" + filepath.Dir(plugin),
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + agentPod}
	cmd.Stdin = bytes.NewReader(conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("cilium-cni %s: %w: %s %s", command, err, out, stderr.String())
	}
	return out, nil
}

// podNetns is a fresh network namespace for the test pod, deleted at the end.
func podNetns(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "cltest-pod-" + hex.EncodeToString(b)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return filepath.Join("/run/netns", name)
}

// mountBPFFS mounts a bpffs of the test's own for the agent's pins and
// unmounts it at the end, so nothing is left on the host's.
func mountBPFFS(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpffs", dir, "bpf", 0, ""); err != nil {
		t.Skipf("mount bpffs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
