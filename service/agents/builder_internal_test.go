package agents

import (
	"context"
	"testing"

	"github.com/agentd/agentd/runtime"
)

// echoTool returns its arguments.
type echoTool struct{ spec runtime.ToolSpec }

func (t *echoTool) Spec() runtime.ToolSpec { return t.spec }

func (t *echoTool) Execute(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
	return runtime.Output{Text: "ran " + call.Arguments}, nil
}

// schemaTool is a runtime.SchemaTool.
type schemaTool struct {
	runtime.Tool
	schema *runtime.Schema
}

func (t schemaTool) Schema() *runtime.Schema { return t.schema }

func TestWithIdempotent(t *testing.T) {
	params := []byte(`{"type":"object","properties":{"x":{"type":"string"}}}`)
	schema, err := runtime.CompileSchema(params)
	if err != nil {
		t.Fatal(err)
	}
	plain := &echoTool{runtime.ToolSpec{Name: "t", Parameters: params, Parallel: true}}
	compiled := schemaTool{plain, schema}

	if got := withIdempotent(plain, false); got != runtime.Tool(plain) {
		t.Errorf("withIdempotent(false) of a tool that is not idempotent = %#v, want the tool itself", got)
	}
	for name, tool := range map[string]runtime.Tool{"plain": plain, "schema": compiled} {
		got := withIdempotent(tool, true)
		spec := got.Spec()
		if want := tool.Spec(); !spec.Idempotent || spec.Name != want.Name || string(spec.Parameters) != string(want.Parameters) || !spec.Parallel {
			t.Errorf("%s: spec %+v, want %+v made idempotent", name, spec, want)
		}
		out, err := got.Execute(t.Context(), runtime.ToolCall{Arguments: `{"x":"y"}`})
		if err != nil || out.Text != `ran {"x":"y"}` {
			t.Errorf("%s: Execute = %+v, %v; want the tool's result", name, out, err)
		}
		st, isSchema := got.(runtime.SchemaTool)
		if isSchema != (name == "schema") {
			t.Errorf("%s: the wrapped tool is a SchemaTool: %v", name, isSchema)
		}
		if isSchema && st.Schema() != schema {
			t.Errorf("%s: Schema() is not the tool's compiled schema", name)
		}
		if back := withIdempotent(got, false); back.Spec().Idempotent {
			t.Errorf("%s: declared idempotent and then not: still idempotent", name)
		}
	}
}
