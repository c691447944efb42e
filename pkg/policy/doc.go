// Package policy is the network policy engine: rules (Rule, with the
// selectors of their subjects and peers), the identities of the cluster
// and the node's endpoints go in; each endpoint's policy map entries come
// out, changed by delta (Engine.Flush). A selector cache keeps the
// identities of every selector in use, so that an identity that comes or
// goes touches only the entries of the selectors that select it.
//
// The package is pure: no Kubernetes client, no statedb, no hive, no
// kernel. Kubernetes objects become rules in pkg/policy/k8s; the agent's
// cell that runs the engine and writes its entries into tables for the
// datapath's reconciler is pkg/policy/agent.
package policy
