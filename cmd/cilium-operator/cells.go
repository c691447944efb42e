package main

import (
	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/operator/crdinstall"
	"github.com/cilium-go/cilium/operator/gc"
	"github.com/cilium-go/cilium/operator/health"
	"github.com/cilium-go/cilium/operator/hubblecerts"
	"github.com/cilium-go/cilium/operator/ipam"
	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/lbipam"
	"github.com/cilium-go/cilium/operator/leader"
)

// The operator, module by module. Each module owns its flags.
var (
	// Infrastructure: the API server and who leads.
	Infrastructure = cell.Group(
		k8s.Cell,    // --kubeconfig: clients for core, Cilium and CRD kinds
		leader.Cell, // --leader-election-*: runs the controllers below on one replica
		health.Cell, // --operator-api-serve-addr: /healthz for probes
	)

	// Controllers: run only on the leader, in any order; those needing
	// Cilium's kinds wait for crdinstall.
	Controllers = cell.Group(
		crdinstall.Cell,  // create or upgrade the CRDs
		ipam.Cell,        // --cluster-pool-ipv4-*: a pod CIDR in each node's CiliumNode
		gc.Cell,          // --identity-gc-*, --endpoint-gc-interval: leftovers of agents
		hubblecerts.Cell, // --hubble-tls-*: Hubble's CA and certificates in Secrets
		lbipam.Cell,      // --enable-lb-ipam, --default-lb-service-ipam: LoadBalancer addresses from pools
	)
)
