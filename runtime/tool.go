package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
// object. Each distinct schema text is compiled once and its Schema shared: the runtime
// compiles its tools' schemas through the same cache, so compiling one of those again
// costs a map lookup. It is safe for concurrent use.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	key := string(raw)
	if v, ok := schemaCache.Load(key); ok {
		return v.(*Schema), nil
	}
	s, err := compileSchema(raw)
	if err != nil {
		// Failures are not kept: schemas come from clients too, and the texts of bad
		// ones must not pile up in the cache.
		return nil, err
	}
	if schemasCached.Load() >= maxCachedSchemas {
		// Full: clients send schemas too, and each distinct text would stay for good.
		return s, nil
	}
	v, loaded := schemaCache.LoadOrStore(key, s)
	if !loaded {
		schemasCached.Add(1)
	}
	return v.(*Schema), nil
}

// schemaCache holds the compiled Schema of each distinct schema text, up to
// maxCachedSchemas of them; schemasCached counts them.
var (
	schemaCache   sync.Map // string -> *Schema
	schemasCached atomic.Int64
)

// maxCachedSchemas bounds schemaCache: far more than any deployment's tools, few enough
// that clients declaring ever new tool schemas cannot grow it without end.
const maxCachedSchemas = 4096

func compileSchema(raw json.RawMessage) (*Schema, error) {
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
	cut := cutAtRune(s, n)
	return s[:cut] + fmt.Sprintf("… (%d more bytes)", len(s)-cut)
}

// cutAtRune returns where to cut s to keep at most n bytes (n < len(s)) without splitting
// a character: n, or the start of the character byte n falls in.
func cutAtRune(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
