package runtime

import (
	"encoding/json"
	"fmt"
	"testing"
)

// Clients declare tool schemas of their own; the cache of compiled schemas stops growing
// at its bound, and schemas past it still compile and validate.
func TestCompileSchemaCacheIsBounded(t *testing.T) {
	schema := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"p%d":{"type":"integer"}},"required":["p%d"]}`, i, i))
	}
	i := 0
	for ; schemasCached.Load() < maxCachedSchemas; i++ {
		if _, err := CompileSchema(schema(i)); err != nil {
			t.Fatal(err)
		}
	}
	for j := i; j < i+10; j++ {
		s, err := CompileSchema(schema(j))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(fmt.Sprintf(`{"p%d":"x"}`, j)); err == nil {
			t.Errorf("schema %d past the bound accepted a string for an integer", j)
		}
	}
	if n := schemasCached.Load(); n != maxCachedSchemas {
		t.Errorf("%d schemas cached, want the bound %d", n, maxCachedSchemas)
	}
}
