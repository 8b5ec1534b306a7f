package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/runtime"
)

// SchemaConfig is a JSON Schema in the agents file: written as YAML (a mapping), or as
// a string of JSON. Its keys keep the order they are written in, which steers what a
// model generates first.
type SchemaConfig struct {
	// JSON is the schema as JSON text.
	JSON json.RawMessage
}

// UnmarshalYAML takes a mapping, converted to JSON in document order, or a string of
// JSON.
func (s *SchemaConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if !json.Valid([]byte(n.Value)) {
			return fmt.Errorf("line %d: a schema given as a string must be JSON", n.Line)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(n.Value)); err != nil {
			return err
		}
		s.JSON = b.Bytes()
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a schema must be a mapping, or a string of JSON", n.Line)
	}
	var b bytes.Buffer
	if err := nodeJSON(n, &b, 0); err != nil {
		return err
	}
	s.JSON = b.Bytes()
	return nil
}

// MarshalYAML writes the schema back as the JSON it is.
func (s SchemaConfig) MarshalYAML() (any, error) { return string(s.JSON), nil }

// nodeJSON writes n as JSON, a mapping's keys in the order they are written.
func nodeJSON(n *yaml.Node, b *bytes.Buffer, depth int) error {
	if depth > 64 {
		return errors.New("the schema nests more than 64 levels")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			b.WriteString("null")
			return nil
		}
		return nodeJSON(n.Content[0], b, depth+1)
	case yaml.AliasNode:
		return nodeJSON(n.Alias, b, depth+1)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a schema's keys must be strings", k.Line)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value)
			b.Write(key)
			b.WriteByte(':')
			if err := nodeJSON(n.Content[i+1], b, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := nodeJSON(c, b, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %v", n.Line, err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %v", n.Line, err)
		}
		b.Write(out)
	}
	return nil
}

// parseOutputMode reads an agent's output_mode.
func parseOutputMode(s string) (runtime.OutputMode, error) {
	switch s {
	case "", "auto":
		return runtime.OutputAuto, nil
	case "tool":
		return runtime.OutputTool, nil
	case "native":
		return runtime.OutputNative, nil
	}
	return 0, fmt.Errorf("invalid output mode %q: want auto, tool or native", s)
}
