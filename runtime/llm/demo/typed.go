package demo

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The demo model answers a typed run natively (runtime.NativeOutputModel): where the
// request asks for a reply matching a JSON Schema, its answer is a value made from the
// schema and the text it would have said. Every string takes the text (or the schema's
// first enum value), every number the last number in the text (or the schema's minimum,
// or 0), every boolean true; an object holds every property it declares, an array one
// item when it needs one. It follows the schema's structure, not its meaning: an answer
// that does not match (a pattern, a $ref it does not follow) is corrected like any
// model's, and a run whose schema it cannot satisfy ends OUTPUT_INVALID.

// NativeOutput reports that the model answers typed runs natively.
func (*Model) NativeOutput() bool { return true }

// typedAnswer turns text into a value of schema, as JSON.
func typedAnswer(schema json.RawMessage, text string) string {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		s = map[string]any{"type": "object"}
	}
	b, err := json.Marshal(fill(s, text, 0))
	if err != nil {
		return "{}"
	}
	return string(b)
}

var lastNumberRE = regexp.MustCompile(`-?\d+(\.\d+)?`)

// fill makes a value of schema s from text, depth levels down.
func fill(s map[string]any, text string, depth int) any {
	if depth > 16 {
		return nil
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		// Each part's value, objects merged.
		var out any
		for _, part := range all {
			p, _ := part.(map[string]any)
			v := fill(p, text, depth+1)
			om, isObj := out.(map[string]any)
			vm, vObj := v.(map[string]any)
			if isObj && vObj {
				maps.Copy(om, vm)
				continue
			}
			out = v
		}
		return out
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			if first, ok := alts[0].(map[string]any); ok {
				return fill(first, text, depth+1)
			}
		}
	}
	typ := s["type"]
	if ts, ok := typ.([]any); ok && len(ts) > 0 {
		typ = ts[0]
	}
	switch typ {
	case "object":
		props, _ := s["properties"].(map[string]any)
		out := map[string]any{}
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if p, ok := props[name].(map[string]any); ok {
				out[name] = fill(p, text, depth+1)
			}
		}
		return out
	case "array":
		items, _ := s["items"].(map[string]any)
		if n, _ := s["minItems"].(float64); n > 0 && items != nil {
			return []any{fill(items, text, depth+1)}
		}
		return []any{}
	case "number", "integer":
		n := 0.0
		if m := lastNumberRE.FindAllString(text, -1); len(m) > 0 {
			n, _ = strconv.ParseFloat(m[len(m)-1], 64)
		} else if min, ok := s["minimum"].(float64); ok {
			n = min
		}
		if typ == "integer" {
			return int64(n)
		}
		return n
	case "boolean":
		return true
	case "null":
		return nil
	}
	t := strings.TrimSpace(text)
	if max, ok := s["maxLength"].(float64); ok && len([]rune(t)) > int(max) {
		t = string([]rune(t)[:int(max)])
	}
	return t
}
