package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentd/agentd/runtime"
)

// typicalSchema is a tool schema of the usual kind: a dozen properties, an enum, a pattern,
// an optional value as anyOf, and a $ref.
const typicalSchema = `{
  "type": "object",
  "properties": {
    "owner": {"type": "string", "description": "The account that owns the repository."},
    "repo": {"type": "string", "description": "The repository's name."},
    "title": {"type": "string", "minLength": 1, "maxLength": 256},
    "body": {"type": "string", "description": "The issue's text, in Markdown."},
    "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
    "assignees": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9-]{1,39}$"}, "maxItems": 10},
    "milestone": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
    "state": {"type": "string", "enum": ["open", "closed"]},
    "options": {"$ref": "#/$defs/options"}
  },
  "required": ["owner", "repo", "title"],
  "additionalProperties": false,
  "$defs": {
    "options": {"type": "object", "properties": {"draft": {"type": "boolean"}, "notify": {"type": "boolean"}}}
  }
}`

const typicalArgs = `{"owner":"agentd","repo":"agentd","title":"Schemas are bounded","body":"See the limits.","labels":["bug","security"],"assignees":["octo-cat"],"milestone":null,"state":"open","options":{"draft":false}}`

// BenchmarkCompileSchema compares compiling a typical schema as the validator alone does
// it (resolve) with CompileSchema, which adds the analysis of its cost.
func BenchmarkCompileSchema(b *testing.B) {
	b.Run("resolve", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s jsonschema.Schema
			if err := json.Unmarshal([]byte(typicalSchema), &s); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Resolve(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := runtime.CompileSchema(json.RawMessage(typicalSchema)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkValidate compares validating typical arguments with the validator alone and
// with Schema.Validate, which first sums what validating them can cost.
func BenchmarkValidate(b *testing.B) {
	b.Run("validator", func(b *testing.B) {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(typicalSchema), &s); err != nil {
			b.Fatal(err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := json.Unmarshal([]byte(typicalArgs), &v); err != nil {
				b.Fatal(err)
			}
			if err := rs.Validate(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Validate", func(b *testing.B) {
		s, err := runtime.CompileSchema(json.RawMessage(typicalSchema))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Validate(typicalArgs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
