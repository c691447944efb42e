// Package ciliumapi converts the agent's API bodies (pkg/api/models) into
// Cilium's REST models (github.com/cilium/cilium/api/v1/models), so that
// Cilium's tools (cilium-cli runs cilium-dbg in the agent pod and decodes
// its JSON with those models) read cilium-go's agent unchanged. Only what
// the agent really has is filled in; the rest stays unset.
package ciliumapi

import (
	_ "github.com/cilium/cilium/api/v1/models"
)
