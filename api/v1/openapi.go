// Package v1 embeds the agent's REST API description, api/v1/openapi.yaml,
// which the agent serves at GET /v1/openapi.yaml.
package v1

import _ "embed"

// OpenAPI is the document.
//
//go:embed openapi.yaml
var OpenAPI []byte
