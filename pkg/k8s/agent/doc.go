// Package agent holds the agent's Kubernetes clients and the flags that
// make them (--enable-k8s, --kubeconfig, --k8s-node-name, ...). What the
// agent reads of the cluster is in the tables of pkg/k8s/tables; each
// consumer translates the objects it reads itself.
package agent
