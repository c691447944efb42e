// Package ciliumendpoint publishes a CiliumEndpoint for every local
// endpoint, for the other nodes' ipcaches, and removes the ones of this
// node whose endpoint is gone.
package ciliumendpoint

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity/allocator"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/node"
)

// Publisher keeps one CiliumEndpoint per local endpoint and removes the
// ones of this node whose endpoint is gone.
type Publisher struct {
	clients *agent.Clients
	nodes   *node.Cluster
	pods    statedb.Table[*corev1.Pod]
	ceps    statedb.Table[*v2.CiliumEndpoint]
	ids     *allocator.PodIdentities
}

// NewPublisher writes through c what the tables of nodes, pods and
// CiliumEndpoints and ids say.
func NewPublisher(c *agent.Clients, nodes *node.Cluster, pods statedb.Table[*corev1.Pod],
	ceps statedb.Table[*v2.CiliumEndpoint], ids *allocator.PodIdentities) *Publisher {
	return &Publisher{clients: c, nodes: nodes, pods: pods, ceps: ceps, ids: ids}
}

// Inputs are the tables what Sync writes depends on, besides the
// endpoints: the pods (owners, labels), this node's address, and the
// CiliumEndpoints as they are (a stray one goes, a changed one is put
// back).
func (p *Publisher) Inputs() []desired.Input {
	return append(p.nodes.Inputs(), desired.TableInput(p.pods), desired.TableInput(p.ceps))
}

// Sync makes the CiliumEndpoints of this node match local. It reads
// existing objects from their table as of txn, so a write the table has
// not seen yet may conflict; the next Sync fixes that.
func (p *Publisher) Sync(ctx context.Context, txn statedb.ReadTxn, local []endpoint.Endpoint) error {
	nodeIP, _ := p.nodes.SelfIPv4(txn)
	existing := map[string]*v2.CiliumEndpoint{}
	for cep := range p.ceps.All(txn) {
		existing[cep.Namespace+"/"+cep.Name] = cep
	}
	var errs []error
	want := map[string]bool{}
	for _, ep := range local {
		if ep.PodName == "" || ep.PodNamespace == "" {
			continue
		}
		key := ep.PodNamespace + "/" + ep.PodName
		want[key] = true
		errs = append(errs, p.publish(ctx, txn, ep, nodeIP, existing[key]))
	}
	for key, cep := range existing {
		if want[key] || !p.ours(cep, nodeIP) {
			continue
		}
		err := p.clients.Cilium.CiliumV2().CiliumEndpoints(cep.Namespace).Delete(ctx, cep.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cep.UID}})
		if err != nil && !k8serrors.IsNotFound(err) && !k8serrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete CiliumEndpoint %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

// ours: published from this node. Before the node's address is known
// nothing is, so nothing is deleted.
func (p *Publisher) ours(cep *v2.CiliumEndpoint, nodeIP netip.Addr) bool {
	n := cep.Status.Networking
	return nodeIP.IsValid() && n != nil && n.NodeIP == nodeIP.String()
}

func (p *Publisher) publish(ctx context.Context, txn statedb.ReadTxn, ep endpoint.Endpoint, nodeIP netip.Addr, old *v2.CiliumEndpoint) error {
	pod, err := p.pod(ctx, txn, ep)
	if err != nil {
		return err
	}
	id, _ := p.ids.Identity(endpoint.Pod{Namespace: ep.PodNamespace, Name: ep.PodName})
	cep := CiliumEndpoint(pod, ep, id, nodeIP)
	c := p.clients.Cilium.CiliumV2().CiliumEndpoints(cep.Namespace)
	if old == nil {
		_, err = c.Create(ctx, cep, metav1.CreateOptions{})
		if k8serrors.IsAlreadyExists(err) {
			return nil // the cache is behind; the next sync updates it
		}
		if err != nil {
			return fmt.Errorf("create CiliumEndpoint %s/%s: %w", cep.Namespace, cep.Name, err)
		}
		return nil
	}
	if reflect.DeepEqual(old.Status, cep.Status) && reflect.DeepEqual(old.OwnerReferences, cep.OwnerReferences) &&
		reflect.DeepEqual(old.Labels, cep.Labels) {
		return nil
	}
	cep.ResourceVersion = old.ResourceVersion
	if _, err := c.Update(ctx, cep, metav1.UpdateOptions{}); err != nil && !k8serrors.IsConflict(err) {
		return fmt.Errorf("update CiliumEndpoint %s/%s: %w", cep.Namespace, cep.Name, err)
	}
	return nil
}

// pod is the endpoint's pod from its table, or from the API server when
// the table has not seen it yet (it was just scheduled here).
func (p *Publisher) pod(ctx context.Context, txn statedb.ReadTxn, ep endpoint.Endpoint) (*corev1.Pod, error) {
	if pod, ok := tables.Get(txn, p.pods, ep.PodNamespace+"/"+ep.PodName); ok {
		return pod, nil
	}
	pod, err := p.clients.Kube.CoreV1().Pods(ep.PodNamespace).Get(ctx, ep.PodName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", ep.PodNamespace, ep.PodName, err)
	}
	return pod, nil
}
