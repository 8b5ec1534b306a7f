package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// doublingSchema returns a schema of n levels in which each level applies the next one
// twice: through anyOf, allOf or oneOf to the same value, or through properties and
// patternProperties to the same property. Validating against it costs 2^n applications.
func doublingSchema(kind string, n int) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"}},"$defs":{`)
	for i := range n {
		next := fmt.Sprintf(`{"$ref":"#/$defs/a%d"}`, i+1)
		switch kind {
		case "properties":
			fmt.Fprintf(&b, `"a%d":{"properties":{"x":%s},"patternProperties":{"^x$":%s}},`, i, next, next)
		default:
			fmt.Fprintf(&b, `"a%d":{%q:[%s,%s]},`, i, kind, next, next)
		}
	}
	fmt.Fprintf(&b, `"a%d":{"type":"string"}}}`, n)
	return json.RawMessage(b.String())
}

// treeSchema is a legitimately recursive schema: a binary tree of integers.
const treeSchema = `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"left":{"$ref":"#/$defs/node"},"right":{"$ref":"#/$defs/node"}},"additionalProperties":false}}}`

// treeArgs returns a tree whose deepest value is at depth n (n >= 1), with leaf as its
// last value.
func treeArgs(n int, leaf string) string {
	s := `{"value":` + leaf + `}`
	for range n - 1 {
		s = `{"value":1,"left":` + s + `,"right":{"value":2}}`
	}
	return s
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestCompileSchemaRefusesDoublingReferences(t *testing.T) {
	for _, kind := range []string{"anyOf", "allOf", "oneOf", "properties"} {
		for _, n := range []int{18, 20, 24} {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				raw := doublingSchema(kind, n)
				var err error
				bytes := allocated(func() { _, err = runtime.CompileSchema(raw) })
				if !errors.Is(err, runtime.ErrSchemaTooComplex) {
					t.Fatalf("CompileSchema(%d-level doubling %s schema) = %v, want ErrSchemaTooComplex", n, kind, err)
				}
				if !strings.Contains(err.Error(), "subschema applications; the limit is 1000") {
					t.Errorf("error %q does not name the limit", err)
				}
				if bytes > 16<<20 {
					t.Errorf("refusing it allocated %d bytes, want under 16 MiB", bytes)
				}
			})
		}
	}
}

func TestCompileSchemaAcceptsRecursiveTree(t *testing.T) {
	s, err := runtime.CompileSchema(json.RawMessage(treeSchema))
	if err != nil {
		t.Fatalf("CompileSchema(tree) = %v", err)
	}
	tests := []struct {
		name, args string
		wantErr    string // "" for valid
	}{
		{"shallow", treeArgs(2, "3"), ""},
		{"64 deep", treeArgs(64, "3"), ""},
		{"bad leaf", treeArgs(4, `"three"`), `want "integer"`},
		{"65 deep", treeArgs(65, "3"), "the arguments nest more than 64 objects and arrays deep; the limit is 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(tt.args)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate = %v, want valid", err)
			case tt.wantErr != "" && (!errors.Is(err, runtime.ErrInvalidArguments) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate = %v, want ErrInvalidArguments saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestCompileSchemaLimits(t *testing.T) {
	nested := func(n int) string { // n levels of subschemas
		return strings.Repeat(`{"properties":{"a":`, n-1) + `{}` + strings.Repeat(`}}`, n-1)
	}
	refs := func(n int) string {
		return `{"$defs":{"a":{}},"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/a"},`, n), ",") + `]}`
	}
	tests := []struct {
		name    string
		raw     string
		limits  runtime.SchemaLimits
		wantErr string // "" to accept
	}{
		{"bytes within", `{"description":"` + strings.Repeat("x", 60<<10) + `"}`, runtime.SchemaLimits{}, ""},
		{"bytes past", `{"description":"` + strings.Repeat("x", 64<<10) + `"}`, runtime.SchemaLimits{}, "bytes of JSON; the limit is 65536"},
		{"bytes past a lower limit", `{"type":"object"}`, runtime.SchemaLimits{MaxBytes: 10}, "17 bytes of JSON; the limit is 10"},
		{"depth within", nested(32), runtime.SchemaLimits{}, ""},
		{"depth past", nested(33), runtime.SchemaLimits{}, "subschemas nest more than 32 deep (at " + strings.Repeat("/properties/a", 32) + "); the limit is 32"},
		{"JSON nesting past", `{"const":` + strings.Repeat("[", 81) + strings.Repeat("]", 81) + `}`, runtime.SchemaLimits{}, "nests 82 objects and arrays deep; the limit is 80"},
		{"refs within", refs(256), runtime.SchemaLimits{}, ""},
		{"refs past", refs(257), runtime.SchemaLimits{}, "257 $ref and $dynamicRef keywords; the limit is 256"},
		{"patterns within", `{"pattern":"^[a-z]{1,64}$"}`, runtime.SchemaLimits{}, ""},
		{"patterns past", `{"properties":{"a":{"pattern":"^(?:ab|cd){1000}$"}},"patternProperties":{"^(?:ab|cd){1000}$":{}}}`, runtime.SchemaLimits{}, "patternProperties compile to about 14016 instructions together; the limit is 10000"},
		{"work past a lower limit", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, runtime.SchemaLimits{MaxWork: 2}, "could take 3 subschema applications; the limit is 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runtime.CompileSchemaLimits(json.RawMessage(tt.raw), tt.limits)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("CompileSchemaLimits = %v, want it accepted", err)
			case tt.wantErr != "" && (!errors.Is(err, runtime.ErrSchemaTooComplex) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("CompileSchemaLimits = %v, want ErrSchemaTooComplex saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestCompileSchemaRefusesValidationWithoutEnd(t *testing.T) {
	tests := []struct {
		name, raw  string
		tooComplex bool // else another error
		want       string
	}{
		{"$ref to itself", `{"$ref":"#"}`, true, "(root → root"},
		{"through allOf", `{"properties":{"a":{}},"allOf":[{"$ref":"#"}]}`, true, "(root → /allOf/0 → root"},
		{"through two definitions", `{"$ref":"#/$defs/a","$defs":{"a":{"not":{"$ref":"#/$defs/b"}},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}}}`, true, "/$defs/a → /$defs/a/not → /$defs/b → /$defs/b/anyOf/0 → /$defs/a"},
		{"through then", `{"if":{"type":"object"},"then":{"$ref":"#"}}`, true, "root → /then → root"},
		{"through dependentSchemas", `{"dependentSchemas":{"a":{"$ref":"#"}}}`, true, "root → /dependentSchemas/a → root"},
		{"draft-07 through dependencies", `{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":{"$ref":"#"}}}`, true, "root → /dependencies/a → root"},
		{"through $dynamicRef", `{"$dynamicAnchor":"meta","allOf":[{"$dynamicRef":"#meta"}]}`, true, "root → /allOf/0 → root"},
		{"$ref to an absent subschema", `{"$ref":"#/not"}`, false, `cannot follow reference "#/not": it points to no subschema`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runtime.CompileSchema(json.RawMessage(tt.raw))
			if err == nil || errors.Is(err, runtime.ErrSchemaTooComplex) != tt.tooComplex || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CompileSchema(%s) = %v, want an error saying %q (too complex: %v)", tt.raw, err, tt.want, tt.tooComplex)
			}
		})
	}
}

func TestValidateFollowsTheSchema(t *testing.T) {
	tests := []struct {
		name, schema, args string
		valid              bool
	}{
		{"anyOf", `{"properties":{"a":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`, `{"a":null}`, true},
		{"anyOf fails", `{"properties":{"a":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`, `{"a":1}`, false},
		{"enum of objects", `{"properties":{"a":{"enum":[{"b":[1,"x"]}]}}}`, `{"a":{"b":[1.0,"x"]}}`, true},
		{"const string", `{"properties":{"a":{"const":"x"}}}`, `{"a":"y"}`, false},
		{"uniqueItems", `{"properties":{"a":{"uniqueItems":true}}}`, `{"a":[{"x":1},{"x":1}]}`, false},
		{"patternProperties", `{"patternProperties":{"^n_":{"type":"number"}}}`, `{"n_a":"x"}`, false},
		{"propertyNames", `{"propertyNames":{"maxLength":2}}`, `{"abc":1}`, false},
		{"unevaluatedProperties", `{"allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`, `{"a":1,"b":2}`, false},
		{"prefixItems and items", `{"properties":{"a":{"prefixItems":[{"type":"string"}],"items":{"type":"integer"}}}}`, `{"a":["x",1,2]}`, true},
		{"draft-07 items array", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"items":[{"type":"string"}],"additionalItems":false}}}`, `{"a":["x",1]}`, false},
		{"draft-07 $ref hides siblings", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"object"}},"$ref":"#/definitions/s","required":["a"]}`, `{}`, true},
		{"$dynamicRef", `{"$dynamicAnchor":"t","properties":{"kids":{"items":{"$dynamicRef":"#t"}},"n":{"type":"integer"}}}`, `{"kids":[{"n":1,"kids":[{"n":"x"}]}]}`, false},
		{"contains", `{"properties":{"a":{"contains":{"type":"string"},"minContains":2}}}`, `{"a":["x",1,"y"]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := runtime.CompileSchema(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(tt.args); (err == nil) != tt.valid {
				t.Errorf("Validate(%s) = %v, want valid: %v", tt.args, err, tt.valid)
			}
		})
	}
}

func TestValidateQuotesValuesShortly(t *testing.T) {
	s, err := runtime.CompileSchema(json.RawMessage(`{"properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	big := `{"a":{"k":"` + strings.Repeat("v", 10_000) + `"}}`
	err = s.Validate(big)
	if want := `type: {…} has type "object", want "string"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate(big object) = %v, want it to say %q", err, want)
	}
	long := `{"b":"` + strings.Repeat("é", 100) + `"}`
	err = s.Validate(long)
	if want := `type: ` + strings.Repeat("é", 32) + `… has type "string"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate(long string) = %v, want it to say %q", err, want)
	}
}

func TestValidateRefusesCostlyArguments(t *testing.T) {
	items := func(n int) string {
		return `{"a":[` + strings.TrimSuffix(strings.Repeat(`1,`, n), ",") + `]}`
	}
	const schema = `{"properties":{"a":{"items":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"s":{"maxLength":3}}}`
	tests := []struct {
		name    string
		limits  runtime.SchemaLimits
		args    string
		wantErr string // "" for valid
	}{
		{"work within", runtime.SchemaLimits{MaxArgsWork: 1000}, items(300), ""},
		// 1 + 1 + 400 items × 3
		{"work past", runtime.SchemaLimits{MaxArgsWork: 1000}, items(400), "(402 values) could take 1202 subschema applications; the limit is 1000"},
		{"cost within", runtime.SchemaLimits{MaxArgsCost: 1 << 20}, `{"s":"abc"}`, ""},
		{"cost past", runtime.SchemaLimits{MaxArgsCost: 1 << 20}, `{"s":"` + strings.Repeat("x", 1<<18) + `"}`, "bytes; the limit is 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := runtime.CompileSchemaLimits(json.RawMessage(schema), tt.limits)
			if err != nil {
				t.Fatal(err)
			}
			err = s.ValidateContext(t.Context(), tt.args)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("ValidateContext = %v, want valid", err)
			case tt.wantErr != "" && (!errors.Is(err, runtime.ErrInvalidArguments) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("ValidateContext = %v, want ErrInvalidArguments saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateContextCancelled(t *testing.T) {
	s, err := runtime.CompileSchema(json.RawMessage(treeSchema))
	if err != nil {
		t.Fatal(err)
	}
	args := treeArgs(60, "3") // large, and within the limits
	if err := s.ValidateContext(t.Context(), args); err != nil {
		t.Fatalf("ValidateContext = %v, want valid", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.ValidateContext(ctx, args); !errors.Is(err, context.Canceled) {
		t.Errorf("ValidateContext(cancelled) = %v, want context.Canceled", err)
	}
}

func TestCompileSchemaKeepsNothing(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)
	s1, err := runtime.CompileSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := runtime.CompileSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	if s1 == s2 {
		t.Error("compiling the same text twice returned the same Schema: something keeps them")
	}
	w := weak.Make(s1)
	s1, s2 = nil, nil
	for range 3 {
		goruntime.GC()
	}
	if w.Value() != nil {
		t.Error("a compiled Schema survived garbage collection: something keeps it")
	}
}

// carrier is a tool carrying a Schema compiled elsewhere; it counts the calls of Schema.
type carrier struct {
	runtime.Tool
	schema *runtime.Schema
	asked  atomic.Int32
}

func (c *carrier) Schema() *runtime.Schema {
	c.asked.Add(1)
	return c.schema
}

func TestSchemaToolIsNotCompiledAgain(t *testing.T) {
	// Parameters accept any object, the carried schema requires "a": calls are
	// validated with the carried one only if the agent does not compile Parameters.
	carried, err := runtime.CompileSchema(json.RawMessage(`{"required":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	newCarrier := func(name string) *carrier {
		return &carrier{Tool: runtime.NewTool(runtime.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}, rt.Echo), schema: carried}
	}
	agentTool, clientTool := newCarrier("agent_tool"), newCarrier("client_tool")
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "agent_tool", `{}`, "client_tool", `{}`), rt.Say("done")}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{agentTool}})
	evs, _ := run(t, a, t.Context(), &runtime.Request{ClientTools: []runtime.Tool{clientTool}})
	var got []string
	for _, r := range eventsOf[*runtime.ToolCallResult](evs) {
		got = append(got, r.Result.Output.Text)
	}
	if len(got) != 2 {
		t.Fatalf("results = %q, want two", got)
	}
	for _, text := range got {
		if !strings.Contains(text, `missing properties: ["a"]`) {
			t.Errorf("result %q: want the carried schema's error", text)
		}
	}
	if n := agentTool.asked.Load(); n != 1 {
		t.Errorf("agent tool's Schema asked %d times, want once (when the agent is built)", n)
	}
	if n := clientTool.asked.Load(); n != 1 {
		t.Errorf("client tool's Schema asked %d times, want once (when the run starts)", n)
	}
}
