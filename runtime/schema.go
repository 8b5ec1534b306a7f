package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentd/agentd/runtime/internal/schemacost"
)

// ErrSchemaTooComplex is wrapped by the errors of [CompileSchema] for a schema past one of
// its limits, or one whose validation would never end (a subschema that applies to the
// same value again through $ref). The error says which limit, and by how much.
var ErrSchemaTooComplex = schemacost.ErrTooComplex

// ErrInvalidArguments is wrapped by the errors of [Schema.ValidateContext] and
// [Schema.Validate].
var ErrInvalidArguments = errors.New("invalid arguments")

// Schema is a compiled JSON Schema for tool arguments. It is safe for concurrent use.
type Schema struct {
	resolved *jsonschema.Resolved
	limits   schemacost.Limits
	cost     schemacost.Cost

	// validating, when set, runs first on the goroutine that validates in the background.
	// Tests set it to cancel a validation while it runs.
	validating func()
}

// SchemaTool is a [Tool] that carries the compiled schema of its Spec().Parameters. An agent
// validates the calls of such a tool with that Schema instead of compiling Parameters again:
// whoever accepted the tool has compiled its schema already, with [CompileSchema].
// Schema must return the same Schema every time, compiled from Spec().Parameters; nil means
// the agent compiles Parameters itself.
type SchemaTool interface {
	Tool
	Schema() *Schema
}

// CompileSchema compiles a tool's parameter schema within fixed limits on what compiling
// it and validating a call's arguments may cost: 64 KiB of JSON, subschemas nested 32 deep,
// 256 references, regular expressions of 10,000 instructions together, and a bounded
// number of subschema applications per value and per call (past them, an error wrapping
// [ErrSchemaTooComplex] names the limit). A nil or empty schema accepts any JSON object. Each call compiles anew and returns a Schema of its
// own. It is safe for concurrent use.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	return compileSchemaLimits(raw, schemacost.Limits{})
}

// compileSchemaLimits is [CompileSchema] within limits. A schema past them is refused with an
// error wrapping [ErrSchemaTooComplex] that names the limit. The Schema keeps the limits for
// validating arguments. Compiling costs time and memory in proportion to the schema's size
// (at most limits.MaxBytes) times MaxArgsDepth, and to its regular expressions (at most
// MaxPatternSize). It is safe for concurrent use.
func compileSchemaLimits(raw json.RawMessage, limits schemacost.Limits) (*Schema, error) {
	limits = limits.WithDefaults()
	if len(raw) == 0 {
		return &Schema{limits: limits}, nil
	}
	if len(raw) > limits.MaxBytes {
		return nil, fmt.Errorf("%w: the schema is %d bytes of JSON; the limit is %d", ErrSchemaTooComplex, len(raw), limits.MaxBytes)
	}
	// The decoder decodes every subschema's text again for each subschema around it:
	// bounding the nesting first bounds that work.
	if d, limit := schemacost.JSONNesting(raw), 2*limits.MaxDepth+16; d > limit {
		return nil, fmt.Errorf("%w: the schema's JSON nests %d objects and arrays deep; the limit is %d", ErrSchemaTooComplex, d, limit)
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	// Checked before Resolve, which compiles the regular expressions.
	if err := schemacost.CheckShape(&js, limits); err != nil {
		return nil, err
	}
	rs, err := js.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	cost, err := schemacost.Analyze(&js, limits)
	if err != nil {
		return nil, err
	}
	return &Schema{resolved: rs, limits: limits, cost: cost}, nil
}

// Validate is [Schema.ValidateContext] without a context.
func (s *Schema) Validate(args string) error {
	return s.ValidateContext(context.Background(), args)
}

// inlineCost is the estimated cost up to which ValidateContext validates on the caller's
// goroutine: about a millisecond's work, not worth a goroutine.
const inlineCost = 1 << 20

// ValidateContext checks that args is one JSON object that matches the schema. Its error
// wraps [ErrInvalidArguments] and says precisely what is wrong, in words a model can correct
// itself from. Arguments nested deeper than the schema's MaxArgsDepth, or whose validation
// could cost more than its MaxArgsWork or MaxArgsCost, are refused before validating.
//
// When ctx is done, ValidateContext returns ctx.Err() without waiting for the validation: a
// validation that may take long runs on a goroutine of its own, which ends by itself once
// its work, bounded by those limits, is done.
func (s *Schema) ValidateContext(ctx context.Context, args string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return fmt.Errorf("%w: not valid JSON: %v", ErrInvalidArguments, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: must be a JSON object, got %s", ErrInvalidArguments, jsonKind(v))
	}
	if s == nil || s.resolved == nil {
		return nil
	}
	m := schemacost.Meter{Cost: &s.cost, MaxDepth: s.limits.MaxArgsDepth}
	instance := m.Measure(obj)
	switch {
	case m.TooDeep:
		return fmt.Errorf("%w: the arguments nest more than %d objects and arrays deep; the limit is %d", ErrInvalidArguments, s.limits.MaxArgsDepth, s.limits.MaxArgsDepth)
	case m.Work > uint64(s.limits.MaxArgsWork):
		return fmt.Errorf("%w: validating these arguments (%d values) could take %s subschema applications; the limit is %d: send fewer values", ErrInvalidArguments, m.Values, schemacost.FormatCount(m.Work), s.limits.MaxArgsWork)
	case m.Bytes > uint64(s.limits.MaxArgsCost):
		return fmt.Errorf("%w: validating these arguments (%d values) could take %s bytes; the limit is %d: send fewer or shorter values", ErrInvalidArguments, m.Values, schemacost.FormatCount(m.Bytes), s.limits.MaxArgsCost)
	}
	if ctx.Done() == nil || m.Bytes <= inlineCost {
		return s.check(instance)
	}
	done := make(chan error, 1)
	go func() {
		if s.validating != nil {
			s.validating()
		}
		done <- s.check(instance)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// check validates an instance converted by [schemacost.Meter].
func (s *Schema) check(instance schemacost.Object) (err error) {
	defer func() {
		// The validator asserts its invariants with panics; compiling rules out the ones
		// known to fail (a $ref to an absent subschema), and a call must not bring the
		// process down if another does.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the schema could not be applied: %v", ErrInvalidArguments, r)
		}
	}()
	if err := s.resolved.Validate(instance); err != nil {
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

// maxValidationMessage bounds the validation errors a model reads: a message names every
// subschema that failed, and a long one would flood the model's context.
const maxValidationMessage = 1000
