package runtime

// What the external tests reach that an embedder does not.
type SchemaLimits = schemaLimits

var (
	CompileSchemaLimits = compileSchemaLimits
	ErrorType           = errorType
)
