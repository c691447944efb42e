package crdgen

import (
	"fmt"
	"reflect"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	ciliumio "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// Kind describes one custom resource: its names as Cilium registers them.
type Kind struct {
	Type       reflect.Type
	Version    string
	Kind       string
	Plural     string
	Singular   string
	ShortNames []string
	Categories []string
	Scope      apiextensionsv1.ResourceScope
	Status     bool // status subresource
	Columns    []apiextensionsv1.CustomResourceColumnDefinition
	// Deprecated are older versions still served with the same schema,
	// neither stored nor converted (the API server only rewrites
	// apiVersion between versions of one schema).
	Deprecated []string
}

// Kinds are the resources cilium-go serves, with Cilium's names.
var Kinds = []Kind{
	{
		Type: reflect.TypeFor[v2.CiliumNetworkPolicy](), Version: v2.Version, Kind: v2.CNPKindDefinition,
		Plural: v2.CNPPluralName, Singular: "ciliumnetworkpolicy", ShortNames: []string{"cnp", "ciliumnp"},
		Categories: []string{"cilium", "ciliumpolicy"}, Scope: apiextensionsv1.NamespaceScoped, Status: true,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			{Name: "Valid", Type: "string", JSONPath: `.status.conditions[?(@.type=="Valid")].status`},
		},
	},
	{
		Type: reflect.TypeFor[v2.CiliumClusterwideNetworkPolicy](), Version: v2.Version, Kind: v2.CCNPKindDefinition,
		Plural: v2.CCNPPluralName, Singular: "ciliumclusterwidenetworkpolicy", ShortNames: []string{"ccnp"},
		Categories: []string{"cilium", "ciliumpolicy"}, Scope: apiextensionsv1.ClusterScoped, Status: true,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			{Name: "Valid", Type: "string", JSONPath: `.status.conditions[?(@.type=="Valid")].status`},
		},
	},
	{
		Type: reflect.TypeFor[v2.CiliumIdentity](), Version: v2.Version, Kind: v2.CIDKindDefinition,
		Plural: v2.CIDPluralName, Singular: "ciliumidentity", ShortNames: []string{"ciliumid"},
		Categories: []string{"cilium"}, Scope: apiextensionsv1.ClusterScoped,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Namespace", Type: "string", JSONPath: `.metadata.labels.io\.kubernetes\.pod\.namespace`,
				Description: "The namespace of the entity"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	{
		Type: reflect.TypeFor[v2.CiliumEndpoint](), Version: v2.Version, Kind: v2.CEPKindDefinition,
		Plural: v2.CEPPluralName, Singular: "ciliumendpoint", ShortNames: []string{"cep", "ciliumep"},
		Categories: []string{"cilium"}, Scope: apiextensionsv1.NamespaceScoped,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Security Identity", Type: "integer", JSONPath: ".status.identity.id"},
			{Name: "Endpoint State", Type: "string", JSONPath: ".status.state"},
			{Name: "IPv4", Type: "string", JSONPath: ".status.networking.addressing[0].ipv4"},
			{Name: "IPv6", Type: "string", JSONPath: ".status.networking.addressing[0].ipv6"},
		},
	},
	{
		Type: reflect.TypeFor[v2.CiliumNode](), Version: v2.Version, Kind: v2.CNKindDefinition,
		Plural: v2.CNPluralNameForNode, Singular: "ciliumnode", ShortNames: []string{"cn", "ciliumn"},
		Categories: []string{"cilium"}, Scope: apiextensionsv1.ClusterScoped,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "CiliumInternalIP", Type: "string", JSONPath: `.spec.addresses[?(@.type=="CiliumInternalIP")].ip`},
			{Name: "InternalIP", Type: "string", JSONPath: `.spec.addresses[?(@.type=="InternalIP")].ip`},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	{
		// Cilium 1.20 stores v2 and still serves v2alpha1, which
		// policies written for older releases (and cilium-cli's
		// connectivity test) apply.
		Type: reflect.TypeFor[v2.CiliumCIDRGroup](), Version: v2.Version, Kind: v2.CCGKindDefinition,
		Plural: v2.CCGPluralName, Singular: "ciliumcidrgroup", ShortNames: []string{"ccg"},
		Categories: []string{"cilium"}, Scope: apiextensionsv1.ClusterScoped, Deprecated: []string{v2alpha1.Version},
	},
	{
		// Cilium 1.20 stores v2 and still serves v2alpha1.
		Type: reflect.TypeFor[v2.CiliumLoadBalancerIPPool](), Version: v2.Version, Kind: v2.PoolKindDefinition,
		Plural: v2.PoolPluralName, Singular: "ciliumloadbalancerippool",
		ShortNames: []string{"ippools", "ippool", "lbippool", "lbippools"},
		Categories: []string{"cilium"}, Scope: apiextensionsv1.ClusterScoped, Status: true, Deprecated: []string{v2alpha1.Version},
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Disabled", Type: "boolean", JSONPath: ".spec.disabled"},
			{Name: "Conflicting", Type: "string", JSONPath: `.status.conditions[?(@.type=="cilium.io/PoolConflict")].status`},
			{Name: "IPs Available", Type: "string", JSONPath: `.status.conditions[?(@.type=="cilium.io/IPsAvailable")].message`},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	{
		Type: reflect.TypeFor[v2alpha1.CiliumL2AnnouncementPolicy](), Version: v2alpha1.Version, Kind: v2alpha1.L2PolicyKindDefinition,
		Plural: v2alpha1.L2PolicyPluralName, Singular: "ciliuml2announcementpolicy", ShortNames: []string{"l2announcement"},
		Categories: []string{"cilium"}, Scope: apiextensionsv1.ClusterScoped, Status: true,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	{
		Type: reflect.TypeFor[v2alpha1.CiliumEndpointSlice](), Version: v2alpha1.Version, Kind: v2alpha1.CESKindDefinition,
		Plural: v2alpha1.CESPluralName, Singular: "ciliumendpointslice", ShortNames: []string{"ces"},
		Categories: []string{"cilium"}, Scope: apiextensionsv1.ClusterScoped,
	},
}

// schemaProtocols is the protocol enum of Cilium's schema. The API server
// accepts all of them so Cilium policies apply unchanged; the agent's
// validation names the ones it does not enforce.
var schemaProtocols = []string{"TCP", "UDP", "SCTP", "VRRP", "IGMP", "GRE", "IPIP", "IPV6", "ESP", "AH", "ANY"}

func enum[T ~string](vals []T) Override {
	return func() apiextensionsv1.JSONSchemaProps {
		s := apiextensionsv1.JSONSchemaProps{Type: "string"}
		for _, v := range vals {
			s.Enum = append(s.Enum, apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", v))})
		}
		return s
	}
}

// DefaultReflector knows the types whose schema is not their Go shape.
func DefaultReflector() *Reflector {
	return &Reflector{Overrides: map[reflect.Type]Override{
		reflect.TypeFor[api.Entity]():  enum(api.Entities),
		reflect.TypeFor[api.L4Proto](): enum(schemaProtocols),
		reflect.TypeFor[api.ICMPFamily](): func() apiextensionsv1.JSONSchemaProps {
			s := enum(api.ICMPFamilies)()
			s.Default = &apiextensionsv1.JSON{Raw: []byte(`"IPv4"`)}
			return s
		},
		// An ICMP type is a number or a name, as in Cilium: the agent
		// checks the name against the field's family.
		reflect.TypeFor[intstr.IntOrString](): func() apiextensionsv1.JSONSchemaProps {
			return apiextensionsv1.JSONSchemaProps{XIntOrString: true}
		},
		reflect.TypeFor[v2.AllowFirstLastIPType](): enum(v2.AllowFirstLastIPTypes),
		reflect.TypeFor[v2.IPv4orIPv6CIDR](): func() apiextensionsv1.JSONSchemaProps {
			return apiextensionsv1.JSONSchemaProps{Type: "string", Format: "cidr"}
		},
		reflect.TypeFor[api.CIDR](): func() apiextensionsv1.JSONSchemaProps {
			return apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr[int64](64)}
		},
		reflect.TypeFor[api.MismatchAction](): enum(api.MismatchActions),
	}, Refinements: map[reflect.Type]Refinement{
		reflect.TypeFor[api.FQDNSelector](): fqdnLimits,
		reflect.TypeFor[api.PortRuleDNS]():  fqdnLimits,
		reflect.TypeFor[api.HeaderMatch]():  limitStrings(map[string]stringLimit{"name": {min: 1}}),
	}}
}

// stringLimit bounds a string property: its length (0: no bound) and a
// pattern (empty: none).
type stringLimit struct {
	min, max int64
	pattern  string
}

// limitStrings sets the limits of string properties of an object.
func limitStrings(limits map[string]stringLimit) Refinement {
	return func(s *apiextensionsv1.JSONSchemaProps) error {
		for name, l := range limits {
			p, ok := s.Properties[name]
			if !ok || p.Type != "string" {
				return fmt.Errorf("no string property %q to limit", name)
			}
			if l.min > 0 {
				p.MinLength = ptr(l.min)
			}
			if l.max > 0 {
				p.MaxLength = ptr(l.max)
			}
			p.Pattern = l.pattern
			s.Properties[name] = p
		}
		return nil
	}
}

// fqdnLimits are the limits of Cilium's schema on matchName and
// matchPattern, in toFQDNs and rules.dns: a DNS name's length, and the
// characters pkg/fqdn reads, in labels.
var fqdnLimits = limitStrings(map[string]stringLimit{
	"matchName":    {max: api.MaxFQDNLength, pattern: `^([-a-zA-Z0-9_]+[.]?)+$`},
	"matchPattern": {max: api.MaxFQDNLength, pattern: `^([-a-zA-Z0-9_*]+[.]?)+$`},
})

// Build returns the CRD of k.
func Build(r *Reflector, k Kind) (*apiextensionsv1.CustomResourceDefinition, error) {
	s, err := r.TopLevel(k.Type)
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", k.Kind, err)
	}
	v := apiextensionsv1.CustomResourceDefinitionVersion{
		Name: k.Version, Served: true, Storage: true,
		Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s},
		AdditionalPrinterColumns: k.Columns,
	}
	if k.Status {
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	versions := []apiextensionsv1.CustomResourceDefinitionVersion{v}
	for _, name := range k.Deprecated {
		old := *v.DeepCopy()
		old.Name, old.Storage, old.Deprecated = name, false, true
		versions = append(versions, old)
	}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   k.Plural + "." + ciliumio.GroupName,
			Labels: map[string]string{"io.cilium.k8s.crd.schema.version": "cilium-go"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: ciliumio.GroupName,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: k.Kind, ListKind: k.Kind + "List", Plural: k.Plural, Singular: k.Singular,
				ShortNames: k.ShortNames, Categories: k.Categories,
			},
			Scope:    k.Scope,
			Versions: versions,
		},
	}, nil
}
