package runtime_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentd/agentd/runtime"
)

// fuzzLimits are the default limits, with a smaller budget per call's arguments so that
// each input is validated in milliseconds.
var fuzzLimits = runtime.SchemaLimits{MaxArgsWork: 1 << 16, MaxArgsCost: 16 << 20}

// FuzzCompileAndValidate checks that compiling any schema, and validating any arguments
// against what compiles, ends without a panic and with errors that wrap the documented
// sentinels. The limits bound the time and memory each input may take; its seeds in
// testdata/fuzz include schemas whose validation would never end or would take
// exponential time.
func FuzzCompileAndValidate(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`), []byte(`{"a":1}`))
	f.Add([]byte(treeSchema), []byte(treeArgs(8, `"x"`)))
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		s, err := runtime.CompileSchemaLimits(schema, fuzzLimits)
		if err != nil {
			return
		}
		if err := s.ValidateContext(context.Background(), string(args)); err != nil && !errors.Is(err, runtime.ErrInvalidArguments) {
			t.Errorf("ValidateContext = %v, want nil or ErrInvalidArguments", err)
		}
	})
}
