package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is something the model can call.
//
// Execute runs with the run's context (bounded by the tool's timeout) and the call, whose
// Arguments are valid JSON matching the tool's schema. A returned error, like a panic,
// becomes an error result the model reads; it never ends the run. Implementations must be
// safe for concurrent use when Spec().Parallel is set.
type Tool interface {
	Spec() ToolSpec
	Execute(ctx context.Context, call ToolCall) (Output, error)
}

// ToolSpec describes a tool.
type ToolSpec struct {
	// Name is unique within an agent.
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object (draft 2020-12 or draft-07).
	// Nil accepts any JSON object.
	Parameters json.RawMessage
	// Executor says where the tool runs; zero means ExecutorServer.
	Executor Executor
	// CompletesRun ends the run COMPLETED with the tool's output when a call succeeds.
	CompletesRun bool
	// Timeout bounds one call; zero means the agent's default.
	Timeout time.Duration
	// Parallel allows calls to run alongside other parallel calls of the same step.
	Parallel bool
}

// ToolFunc is the function behind a tool made by [NewTool].
type ToolFunc func(ctx context.Context, call ToolCall) (Output, error)

// NewTool returns a Tool with the given spec that runs fn.
func NewTool(spec ToolSpec, fn ToolFunc) Tool { return funcTool{spec, fn} }

type funcTool struct {
	spec ToolSpec
	fn   ToolFunc
}

func (t funcTool) Spec() ToolSpec { return t.spec }

func (t funcTool) Execute(ctx context.Context, call ToolCall) (Output, error) {
	return t.fn(ctx, call)
}

// Schema is a compiled JSON Schema for tool arguments. It is safe for concurrent use.
type Schema struct {
	resolved *jsonschema.Resolved
}

// CompileSchema compiles a tool's parameter schema. A nil or empty schema accepts any JSON
// object.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	if len(raw) == 0 {
		return &Schema{}, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	return &Schema{resolved: rs}, nil
}

// ErrInvalidArguments is wrapped by the errors of [Schema.Validate].
var ErrInvalidArguments = errors.New("invalid arguments")

// Validate checks that args is one JSON object that matches the schema. Its error says
// precisely what is wrong, in words a model can correct itself from.
func (s *Schema) Validate(args string) error {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return fmt.Errorf("%w: not valid JSON: %v", ErrInvalidArguments, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("%w: must be a JSON object, got %s", ErrInvalidArguments, jsonKind(v))
	}
	if s == nil || s.resolved == nil {
		return nil
	}
	if err := s.resolved.Validate(v); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidArguments, truncate(err.Error(), maxValidationMessage))
	}
	return nil
}

// schemaCache compiles each distinct schema text once.
var schemaCache sync.Map // string -> *Schema or error

func compileCached(raw json.RawMessage) (*Schema, error) {
	key := string(raw)
	if v, ok := schemaCache.Load(key); ok {
		if err, isErr := v.(error); isErr {
			return nil, err
		}
		return v.(*Schema), nil
	}
	s, err := CompileSchema(raw)
	if err != nil {
		schemaCache.Store(key, err)
		return nil, err
	}
	schemaCache.Store(key, s)
	return s, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

// maxValidationMessage bounds the validation errors a model reads: the validator quotes
// offending values whole, and a long value would flood the model's context.
const maxValidationMessage = 1000

// truncate cuts s to at most n bytes on a character boundary, saying so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d more bytes)", len(s)-cut)
}
