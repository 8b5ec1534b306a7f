// Package schemacost bounds what a tool's parameter schema costs: compiling it, and
// validating a call's arguments against it with github.com/google/jsonschema-go. Package
// runtime's CompileSchema and Schema.ValidateContext use it; the limits are [Limits].
//
//   - Before the schema is decoded, [JSONNesting] bounds how deeply its JSON text nests.
//   - Before it is resolved, [CheckShape] bounds how deeply its subschemas nest, its
//     references and its regular expressions.
//   - Once it is resolved, [Analyze] follows its references as the validator does, refuses
//     a schema whose validation would never end or could cost too much per value, and
//     returns its [Cost].
//   - Before arguments are validated, a [Meter] converts them for the validator and sums
//     their Cost.
//
// A schema past a limit is refused with an error wrapping [ErrTooComplex].
package schemacost
