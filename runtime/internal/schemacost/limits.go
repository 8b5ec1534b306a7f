package schemacost

import "errors"

// ErrTooComplex is wrapped by the errors that refuse a schema past one of its [Limits], or
// one whose validation would never end (a subschema that applies to the same value again
// through $ref). The error says which limit, and by how much. Package runtime exports it
// as ErrSchemaTooComplex.
var ErrTooComplex = errors.New("schema too complex")

// Limits bounds what a tool's parameter schema may cost: compiling it, and validating
// any one call's arguments against it. The schema's limits are checked when it is compiled,
// so that a schema past them is refused before it is used; the arguments' limits are checked
// by runtime's Schema.ValidateContext, with a [Meter], before it validates. A zero field
// means its default.
//
// The validator (github.com/google/jsonschema-go) applies subschemas to values one by one:
// allOf, anyOf, oneOf, not, if/then/else, $ref, $dynamicRef, dependentSchemas (and draft-07
// dependencies) apply theirs to the same value, and properties, patternProperties,
// additionalProperties, propertyNames, unevaluatedProperties, prefixItems, items,
// additionalItems, contains and unevaluatedItems to the values inside it. Compiling counts
// ([Analyze]), with references followed, how many subschema applications one value of the
// arguments can cost at most, at each depth of the arguments; a schema whose count exceeds
// MaxWork at any depth up to MaxArgsDepth is refused, and so is one in which a subschema
// applies to the same value through itself. Validating then costs at most that count for
// each value of the arguments, which Schema.ValidateContext sums before it starts.
type Limits struct {
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

// The defaults of Limits.
const (
	defaultMaxBytes       = 64 << 10
	defaultMaxDepth       = 32
	defaultMaxRefs        = 256
	defaultMaxPatternSize = 10_000
	defaultMaxWork        = 1_000
	defaultMaxArgsDepth   = 64
	defaultMaxArgsWork    = 1 << 20
	defaultMaxArgsCost    = 256 << 20
)

// WithDefaults returns l with its zero (or negative) fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	def := func(p *int, d int) {
		if *p <= 0 {
			*p = d
		}
	}
	def(&l.MaxBytes, defaultMaxBytes)
	def(&l.MaxDepth, defaultMaxDepth)
	def(&l.MaxRefs, defaultMaxRefs)
	def(&l.MaxPatternSize, defaultMaxPatternSize)
	def(&l.MaxWork, defaultMaxWork)
	def(&l.MaxArgsDepth, defaultMaxArgsDepth)
	def(&l.MaxArgsWork, defaultMaxArgsWork)
	def(&l.MaxArgsCost, defaultMaxArgsCost)
	return l
}
