package ciliumapi

import (
	"slices"

	cm "github.com/cilium/cilium/api/v1/models"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Endpoint is e in Cilium's Endpoint model. Its policy status is there
// when e carries its policy (GET /v1/endpoint/{id}).
func Endpoint(e models.Endpoint) *cm.Endpoint {
	state := cm.EndpointState(e.State)
	ids := &cm.EndpointIdentifiers{ContainerID: e.ContainerID, CniAttachmentID: attachmentID(e)}
	if e.PodName != "" {
		ids.K8sNamespace, ids.K8sPodName = e.PodNamespace, e.PodName
		ids.PodName = e.PodNamespace + "/" + e.PodName
	}
	labels := cm.Labels(slices.Clone(e.Labels))
	out := &cm.Endpoint{ID: int64(e.ID), Status: &cm.EndpointStatus{
		State:               &state,
		ExternalIdentifiers: ids,
		Identity:            &cm.Identity{ID: int64(e.Identity), Labels: labels},
		Labels:              &cm.LabelConfigurationStatus{SecurityRelevant: labels, Realized: &cm.LabelConfigurationSpec{}},
		Networking: &cm.EndpointNetworking{
			Addressing:             []*cm.AddressPair{{IPv4: e.IPv4}},
			InterfaceName:          e.HostIfName,
			InterfaceIndex:         int64(e.HostIfindex),
			ContainerInterfaceName: e.IfName,
			Mac:                    e.MAC,
		},
	}}
	if e.Policy != nil {
		out.Status.Policy = endpointPolicy(e.Policy)
	}
	return out
}

// attachmentID is how Cilium names an endpoint's CNI attachment: the
// container and its interface.
func attachmentID(e models.Endpoint) string {
	if e.IfName == "" {
		return e.ContainerID
	}
	return e.ContainerID + ":" + e.IfName
}

// endpointPolicy is the policy the engine computed (spec) and the one
// the datapath enforces (realized): its policy revision is 0 while the
// datapath is behind.
func endpointPolicy(p *models.EndpointPolicy) *cm.EndpointPolicyStatus {
	spec := policyOf(p)
	realized := policyOf(p)
	realized.PolicyRevision = int64(p.PolicyRevision)
	return &cm.EndpointPolicyStatus{Spec: spec, Realized: realized, ProxyStatistics: []*cm.ProxyStatistics{}}
}

func policyOf(p *models.EndpointPolicy) *cm.EndpointPolicy {
	out := &cm.EndpointPolicy{ID: int64(p.Identity), Build: int64(p.Revision), PolicyEnabled: enabled(p),
		AllowedIngressIdentities: []int64{}, AllowedEgressIdentities: []int64{},
		DeniedIngressIdentities: []int64{}, DeniedEgressIdentities: []int64{}}
	// Whole-identity entries (any protocol and port) are the identity
	// lists of Cilium's model; port entries have no place there.
	for _, e := range p.Entries {
		if e.Protocol != 0 || e.Port != 0 {
			continue
		}
		var list *[]int64
		switch {
		case e.Direction == "ingress" && e.Verdict == models.VerdictDeny:
			list = &out.DeniedIngressIdentities
		case e.Direction == "ingress":
			list = &out.AllowedIngressIdentities
		case e.Verdict == models.VerdictDeny:
			list = &out.DeniedEgressIdentities
		default:
			list = &out.AllowedEgressIdentities
		}
		*list = append(*list, int64(e.Identity))
	}
	return out
}

func enabled(p *models.EndpointPolicy) cm.EndpointPolicyEnabled {
	switch {
	case p.EnforceIngress && p.EnforceEgress:
		return cm.EndpointPolicyEnabledBoth
	case p.EnforceIngress:
		return cm.EndpointPolicyEnabledIngress
	case p.EnforceEgress:
		return cm.EndpointPolicyEnabledEgress
	}
	return cm.EndpointPolicyEnabledNone
}

// Identity is id in Cilium's Identity model.
func Identity(id models.Identity) *cm.Identity {
	return &cm.Identity{ID: int64(id.ID), Labels: cm.Labels(slices.Clone(id.Labels))}
}

// Identities are ids in Cilium's model, in the same order.
func Identities(ids []models.Identity) []*cm.Identity {
	out := make([]*cm.Identity, 0, len(ids))
	for _, id := range ids {
		out = append(out, Identity(id))
	}
	return out
}

// IdentityRange is the range of cluster identities.
func IdentityRange() *cm.IdentityRange {
	return &cm.IdentityRange{MinIdentity: int64(identity.MinClusterIdentity), MaxIdentity: int64(identity.MaxClusterIdentity)}
}
