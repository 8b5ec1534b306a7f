package runtime

import "github.com/agentd/agentd/runtime/internal/schemacost"

// What the external tests reach that an embedder does not.
type SchemaLimits = schemacost.Limits

var (
	CompileSchemaLimits = compileSchemaLimits
	ErrorType           = errorType
)
