// Package ciliumapi converts the agent's API bodies (pkg/api/models) into
// Cilium's REST models (github.com/cilium/cilium/api/v1/models), so that
// Cilium's tools read cilium-go's agent unchanged: cilium-cli runs
// cilium-dbg in the agent pod and decodes its JSON with those models.
// Only what the agent really has is filled in; the rest stays unset, so
// that no tool infers a feature the agent lacks.
package ciliumapi

// Version is the Cilium release whose REST API, models and tools cilium-go
// speaks. cilium-cli strips what follows a "-" and compares the rest.
const Version = "1.20.2"
