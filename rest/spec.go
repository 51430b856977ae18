package rest

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/goccy/go-yaml"
)

// openAPIYAML is the document, as written.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIJSON returns the document as JSON (what GET /v1/openapi.json answers).
func OpenAPIJSON() ([]byte, error) {
	b, err := yaml.YAMLToJSON(openAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("rest: openapi.yaml: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("rest: openapi.yaml: %w", err)
	}
	return json.Marshal(doc)
}
