package openai

import (
	"encoding/json"
	"slices"
)

// strictSchema reports whether schema may go to OpenAI with strict on (Structured
// Outputs), which makes the model's reply match it by construction. Strict mode takes a
// subset of JSON Schema, and refuses a request whose schema strays from it; this check is
// conservative, so that a typed run never fails on a schema OpenAI would refuse: every
// object closes its properties (additionalProperties: false) and requires them all; only
// the keywords below appear; the root is an object; it nests at most 10 objects deep.
// Elsewhere strict stays off, and agentd's own validation, which runs either way, is what
// holds the reply to the schema.
func strictSchema(schema json.RawMessage) bool {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil || root["type"] != "object" {
		return false
	}
	if _, ok := root["anyOf"]; ok {
		return false
	}
	return strictNode(root, 0)
}

// strictKeywords are the keywords strictSchema lets through.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "anyOf": true, "$ref": true, "$defs": true, "description": true, "title": true,
	"pattern": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"multipleOf": true, "minItems": true, "maxItems": true,
}

func strictNode(n map[string]any, depth int) bool {
	if depth > 10 {
		return false
	}
	for k := range n {
		if !strictKeywords[k] {
			return false
		}
	}
	if n["type"] == "object" || n["properties"] != nil {
		props, _ := n["properties"].(map[string]any)
		if n["additionalProperties"] != false {
			return false
		}
		req, _ := n["required"].([]any)
		if len(req) != len(props) {
			return false
		}
		for name, p := range props {
			if !slices.Contains(req, any(name)) {
				return false
			}
			if !strictChild(p, depth+1) {
				return false
			}
		}
	}
	if items, ok := n["items"]; ok && !strictChild(items, depth+1) {
		return false
	}
	if alts, ok := n["anyOf"].([]any); ok {
		for _, a := range alts {
			if !strictChild(a, depth+1) {
				return false
			}
		}
	}
	if defs, ok := n["$defs"].(map[string]any); ok {
		for _, d := range defs {
			if !strictChild(d, depth+1) {
				return false
			}
		}
	}
	return true
}

func strictChild(v any, depth int) bool {
	m, ok := v.(map[string]any)
	return ok && strictNode(m, depth)
}
