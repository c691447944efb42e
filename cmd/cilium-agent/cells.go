package main

import (
	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/metrics"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
	"github.com/cilium-go/cilium/pkg/paths"
)

// The agent, module by module. Each module owns its flags.
var (
	// Infrastructure: where files go, health, metrics.
	Infrastructure = cell.Group(
		paths.Cell,   // --state-dir, --socket-path, --bpf-root
		health.Cell,  // every module's health, read by /healthz and the API
		metrics.Cell, // --prometheus-serve-addr: /metrics and /healthz
	)

	// ControlPlane: what the agent decides, and the API to ask it.
	ControlPlane = cell.Group(
		ipam.Cell,                 // --ipam-pod-cidr: pod addresses
		endpoint.InitIdentityCell, // identities: the init identity for every endpoint, for now
		endpoint.Cell,             // endpoints: create, program, persist, restore
		server.Cell,               // REST API on the unix socket
	)

	// Datapath: the kernel side.
	Datapath = cell.Group(
		nodedatapath.Cell, // --node-ipv4, --uplink, --routing-mode, ...
	)
)
