package openai

import "testing"

func TestStrictSchema(t *testing.T) {
	for _, tt := range []struct {
		name, schema string
		want         bool
	}{
		{"closed, all required", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":["integer","null"]}},"required":["a","b"],"additionalProperties":false}`, true},
		{"nested and referred", `{"type":"object","$defs":{"p":{"type":"object","properties":{"x":{"type":"number","minimum":0}},"required":["x"],"additionalProperties":false}},
			"properties":{"ps":{"type":"array","items":{"$ref":"#/$defs/p"},"maxItems":3},"k":{"anyOf":[{"type":"string"},{"enum":[1,2]}]}},"required":["ps","k"],"additionalProperties":false}`, true},
		{"open object", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, false},
		{"an optional property", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, false},
		{"a nested open object", `{"type":"object","properties":{"a":{"type":"object","properties":{}}},"required":["a"],"additionalProperties":false}`, false},
		{"an unsupported keyword", `{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"],"additionalProperties":false}`, false},
		{"allOf", `{"type":"object","allOf":[{"type":"object"}],"additionalProperties":false}`, false},
		{"anyOf at the root", `{"type":"object","anyOf":[{"type":"object"}],"additionalProperties":false}`, false},
		{"not an object root", `{"type":"array","items":{"type":"string"}}`, false},
		{"not JSON", `{`, false},
		{"too deep", deep(12), false},
		{"deep enough", deep(9), true},
	} {
		if got := strictSchema([]byte(tt.schema)); got != tt.want {
			t.Errorf("%s: strictSchema = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// deep is an object schema whose objects nest n deep, each closed.
func deep(n int) string {
	s := `{"type":"string"}`
	for range n {
		s = `{"type":"object","properties":{"a":` + s + `},"required":["a"],"additionalProperties":false}`
	}
	return s
}
