// Package cni is the cilium-cni plugin: it parses what the runtime hands
// over (network configuration and CNI_ARGS), asks the agent for an address
// and an endpoint over the agent's socket, and wires the pod's veth with
// internal/datapath. cmd/cilium-cni only calls Funcs.
package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// NetConf is the plugin's network configuration.
type NetConf struct {
	types.PluginConf
	// SocketPath is the agent's API socket; empty for the default.
	SocketPath string `json:"socket-path,omitempty"`
	// MTU of the pod's interface; 0 asks the agent, which knows the
	// uplink and the routing mode.
	MTU int `json:"mtu,omitempty"`
}

// ParseConf decodes and checks the configuration, naming the bad field.
func ParseConf(b []byte) (*NetConf, error) {
	c := &NetConf{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration does not parse", err.Error())
	}
	bad := func(format string, a ...any) (*NetConf, error) {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration", fmt.Sprintf(format, a...))
	}
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 65535) {
		return bad("mtu: %d is outside 576-65535", c.MTU)
	}
	if c.SocketPath != "" && !filepath.IsAbs(c.SocketPath) {
		return bad("socket-path: %q is not an absolute path", c.SocketPath)
	}
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.PluginConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "prevResult does not parse", err.Error())
		}
	}
	return c, nil
}

// PodArgs are the Kubernetes arguments a runtime passes in CNI_ARGS.
type PodArgs struct {
	types.CommonArgs
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive // CNI_ARGS names
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive // CNI_ARGS names
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive // CNI_ARGS names
	K8S_POD_UID                types.UnmarshallableString //nolint:revive // CNI_ARGS names
}

// ParseArgs reads CNI_ARGS; unknown keys are ignored, as runtimes pass
// more than any one plugin needs.
func ParseArgs(s string) (PodArgs, error) {
	var a PodArgs
	a.IgnoreUnknown = true
	if err := types.LoadArgs(s, &a); err != nil {
		return a, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_ARGS do not parse", err.Error())
	}
	return a, nil
}

// checkArgs checks what every command that touches a container needs.
func checkArgs(a *skel.CmdArgs, needNetns bool) error {
	switch {
	case a.ContainerID == "":
		return types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID is required", "")
	case a.IfName == "":
		return types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_IFNAME is required", "")
	case len(a.IfName) > 15:
		return types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_IFNAME is longer than 15 characters", a.IfName)
	case needNetns && a.Netns == "":
		return types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_NETNS is required", "")
	}
	return nil
}

// HostIfName is the node-side name of the container's veth: "lxc" and a
// hash, so that it is stable across retries and fits IFNAMSIZ.
func HostIfName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return "lxc" + hex.EncodeToString(sum[:])[:11]
}

// ValidAttachmentsKey is the GC configuration's list of attachments the
// runtime still has. The spec first named it "cni.dev/attachments", and
// libcni sends both, so either is accepted.
const (
	ValidAttachmentsKey    = "cni.dev/valid-attachments"
	oldValidAttachmentsKey = "cni.dev/attachments"
)

// ValidAttachments reads the attachments that GC must keep. A missing key
// is refused rather than read as an empty list: GC would then delete
// every endpoint of the node. An explicit empty list (or null, which
// libcni sends for none) means that nothing is valid.
func ValidAttachments(conf []byte) ([]types.GCAttachment, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(conf, &raw); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration does not parse", err.Error())
	}
	b, ok := raw[ValidAttachmentsKey]
	if !ok {
		b, ok = raw[oldValidAttachmentsKey]
	}
	if !ok {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "GC needs "+ValidAttachmentsKey,
			ValidAttachmentsKey+": missing; a missing list is not an empty one, and GC would delete every attachment of the node")
	}
	var out []types.GCAttachment
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, ValidAttachmentsKey+" does not parse", err.Error())
	}
	for i, v := range out {
		if v.ContainerID == "" || v.IfName == "" {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration",
				fmt.Sprintf("%s[%d]: containerID and ifname are required", ValidAttachmentsKey, i))
		}
	}
	return out, nil
}
