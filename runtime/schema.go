package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// ErrSchemaTooComplex is wrapped by the errors of [CompileSchema] for a schema past one of
// its limits, or one whose validation would never end (a subschema that applies to the
// same value again through $ref). The error says which limit, and by how much.
var ErrSchemaTooComplex = errors.New("schema too complex")

// ErrInvalidArguments is wrapped by the errors of [Schema.ValidateContext] and
// [Schema.Validate].
var ErrInvalidArguments = errors.New("invalid arguments")

// schemaLimits bounds what a tool's parameter schema may cost: compiling it, and validating
// any one call's arguments against it. The schema's limits are checked when it is compiled,
// so that a schema past them is refused before it is used; the arguments' limits are checked
// by [Schema.ValidateContext] before it validates. A zero field means its default.
//
// The validator (github.com/google/jsonschema-go) applies subschemas to values one by one:
// allOf, anyOf, oneOf, not, if/then/else, $ref, $dynamicRef, dependentSchemas (and draft-07
// dependencies) apply theirs to the same value, and properties, patternProperties,
// additionalProperties, propertyNames, unevaluatedProperties, prefixItems, items,
// additionalItems, contains and unevaluatedItems to the values inside it. Compiling counts,
// with references followed, how many subschema applications one value of the arguments can
// cost at most, at each depth of the arguments; a schema whose count exceeds MaxWork at any
// depth up to MaxArgsDepth is refused, and so is one in which a subschema applies to the same
// value through itself. Validating then costs at most that count for each value of the
// arguments, which [Schema.ValidateContext] sums before it starts.
type schemaLimits struct {
	// MaxBytes bounds the length of the schema's JSON text. The default is 64 KiB.
	MaxBytes int
	// MaxDepth bounds how deeply subschemas nest: {"properties":{"a":{"items":{}}}} nests
	// 3 deep. The JSON text itself may nest at most 2*MaxDepth+16 objects and arrays deep.
	// The default is 32.
	MaxDepth int
	// MaxRefs bounds how many $ref and $dynamicRef keywords the schema holds. The default is
	// 256.
	MaxRefs int
	// MaxPatternSize bounds the size of the schema's regular expressions (pattern and
	// patternProperties) together, in instructions of their compiled programs with
	// repetitions written out: "^[a-z]{1,64}$" counts 136. Matching a value costs up to
	// this size for each of its bytes. The default is 10,000.
	MaxPatternSize int
	// MaxWork bounds how many subschema applications validating one value of the arguments
	// may cost. The default is 1,000.
	MaxWork int
	// MaxArgsDepth bounds how deeply the arguments may nest: in {"a":[1]}, the object is at
	// depth 0 and 1 at depth 2. The default is 64.
	MaxArgsDepth int
	// MaxArgsWork bounds how many subschema applications validating one call's arguments
	// may cost: the sum, over the values of the arguments, of the most each may cost at its
	// depth. The default is 1<<20.
	MaxArgsWork int
	// MaxArgsCost bounds the bytes validating one call's arguments may allocate (and the
	// steps matching regular expressions may take), as estimated before validating from
	// the work, the sizes of the values and the schema's error texts: the validator quotes
	// the failing value and names the subschema at every failing application, and each
	// enclosing application copies the message. The estimate supposes every application
	// fails; arguments that pass cost a fraction of it. The default is 256 MiB.
	MaxArgsCost int
}

// The defaults of schemaLimits.
const (
	defaultSchemaMaxBytes       = 64 << 10
	defaultSchemaMaxDepth       = 32
	defaultSchemaMaxRefs        = 256
	defaultSchemaMaxPatternSize = 10_000
	defaultSchemaMaxWork        = 1_000
	defaultSchemaMaxArgsDepth   = 64
	defaultSchemaMaxArgsWork    = 1 << 20
	defaultSchemaMaxArgsCost    = 256 << 20
)

// withDefaults returns l with its zero (or negative) fields set to their defaults.
func (l schemaLimits) withDefaults() schemaLimits {
	def := func(p *int, d int) {
		if *p <= 0 {
			*p = d
		}
	}
	def(&l.MaxBytes, defaultSchemaMaxBytes)
	def(&l.MaxDepth, defaultSchemaMaxDepth)
	def(&l.MaxRefs, defaultSchemaMaxRefs)
	def(&l.MaxPatternSize, defaultSchemaMaxPatternSize)
	def(&l.MaxWork, defaultSchemaMaxWork)
	def(&l.MaxArgsDepth, defaultSchemaMaxArgsDepth)
	def(&l.MaxArgsWork, defaultSchemaMaxArgsWork)
	def(&l.MaxArgsCost, defaultSchemaMaxArgsCost)
	return l
}

// Schema is a compiled JSON Schema for tool arguments. It is safe for concurrent use.
type Schema struct {
	resolved *jsonschema.Resolved
	limits   schemaLimits
	cost     schemaCost

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
	return compileSchemaLimits(raw, schemaLimits{})
}

// compileSchemaLimits is [CompileSchema] within limits. A schema past them is refused with an
// error wrapping [ErrSchemaTooComplex] that names the limit. The Schema keeps the limits for
// validating arguments. Compiling costs time and memory in proportion to the schema's size
// (at most limits.MaxBytes) times MaxArgsDepth, and to its regular expressions (at most
// MaxPatternSize). It is safe for concurrent use.
func compileSchemaLimits(raw json.RawMessage, limits schemaLimits) (*Schema, error) {
	limits = limits.withDefaults()
	if len(raw) == 0 {
		return &Schema{limits: limits}, nil
	}
	if len(raw) > limits.MaxBytes {
		return nil, fmt.Errorf("%w: the schema is %d bytes of JSON; the limit is %d", ErrSchemaTooComplex, len(raw), limits.MaxBytes)
	}
	// The decoder decodes every subschema's text again for each subschema around it:
	// bounding the nesting first bounds that work.
	if d, limit := jsonNesting(raw), 2*limits.MaxDepth+16; d > limit {
		return nil, fmt.Errorf("%w: the schema's JSON nests %d objects and arrays deep; the limit is %d", ErrSchemaTooComplex, d, limit)
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	// Checked before Resolve, which compiles the regular expressions.
	if err := checkSchemaShape(&js, limits); err != nil {
		return nil, err
	}
	rs, err := js.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	cost, err := analyzeSchema(&js, limits)
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
	m := argsMeter{cost: &s.cost, maxDepth: s.limits.MaxArgsDepth}
	instance := m.object(obj)
	switch {
	case m.tooDeep:
		return fmt.Errorf("%w: the arguments nest more than %d objects and arrays deep; the limit is %d", ErrInvalidArguments, s.limits.MaxArgsDepth, s.limits.MaxArgsDepth)
	case m.work > uint64(s.limits.MaxArgsWork):
		return fmt.Errorf("%w: validating these arguments (%d values) could take %s subschema applications; the limit is %d: send fewer values", ErrInvalidArguments, m.values, satString(m.work), s.limits.MaxArgsWork)
	case m.bytes > uint64(s.limits.MaxArgsCost):
		return fmt.Errorf("%w: validating these arguments (%d values) could take %s bytes; the limit is %d: send fewer or shorter values", ErrInvalidArguments, m.values, satString(m.bytes), s.limits.MaxArgsCost)
	}
	if ctx.Done() == nil || m.bytes <= inlineCost {
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

// check validates an instance converted by argsMeter.
func (s *Schema) check(instance jsonObject) (err error) {
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
