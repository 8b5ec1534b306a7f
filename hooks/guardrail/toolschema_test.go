package guardrail_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentd/agentd/hooks/guardrail"
	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// results returns a tool func that returns outs in turn.
func results(outs ...runtime.Output) runtime.ToolFunc {
	var i int
	return func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		out := outs[i%len(outs)]
		i++
		return out, nil
	}
}

// lastResult returns the tool result the last message of a model request holds.
func lastResult(t *testing.T, req *runtime.ModelRequest) runtime.ToolResult {
	t.Helper()
	last := req.Messages[len(req.Messages)-1]
	if last.Role != runtime.RoleTool || len(last.Parts) != 1 {
		t.Fatalf("the request's last message is %s, want one tool result", rt.RenderMessage(last))
	}
	return last.Parts[0].ToolResult
}

const pointSchema = `{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}`

func TestToolOutputSchema_CorrectionShowsTheModelAnError(t *testing.T) {
	g, err := guardrail.ToolOutputSchema(runtime.GuardSpec{OnToolTrip: runtime.GuardCorrect}, json.RawMessage(pointSchema))
	if err != nil {
		t.Fatal(err)
	}
	locate := rt.Tool("locate", results(runtime.Output{JSON: json.RawMessage(`{"x":1}`)}, runtime.Output{JSON: json.RawMessage(`{"x":1,"y":2}`)}))
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "locate", `{}`), rt.Call(1, "locate", `{}`), rt.Say("found it")}}
	_, fin := run(t, m, g, []runtime.Tool{locate})
	if fin.Reason != runtime.EndCompleted || fin.FinalText != "found it" {
		t.Fatalf("run ended %v (%v) with %q, want completed", fin.Reason, fin.Err, fin.FinalText)
	}
	reqs := m.Requests()
	bad := lastResult(t, reqs[1])
	want := `The result of locate was withheld by the guardrail tool_output_schema: the result does not match the schema: validating root: required: missing properties: ["y"]`
	if !bad.Output.IsError || bad.Output.String() != want {
		t.Errorf("the model read %+v, want the error %q", bad.Output, want)
	}
	good := lastResult(t, reqs[2])
	if good.Output.IsError || good.Output.String() != `{"x":1,"y":2}` {
		t.Errorf("the model read %+v, want the result as it was", good.Output)
	}
}

func TestToolOutputSchema_TripEndsTheRunByDefault(t *testing.T) {
	g, err := guardrail.ToolOutputSchema(runtime.GuardSpec{Name: "points", Tools: []string{"locate"}}, json.RawMessage(pointSchema))
	if err != nil {
		t.Fatal(err)
	}
	tools := []runtime.Tool{
		rt.Tool("locate", results(runtime.Output{Text: "somewhere north"})),
		rt.Tool("other", results(runtime.Output{Text: "not JSON, not checked"})),
	}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "other", `{}`), rt.Call(1, "locate", `{}`), rt.Say("unreachable")}}
	_, fin := run(t, m, g, tools)
	ge := tripped(t, fin)
	if ge.Guardrail != "points" || ge.Stage != runtime.GuardToolOutput || ge.Tool != "locate" || ge.CallID != "call_1_0" {
		t.Errorf("tripped %+v, want points at tool_output of locate's call_1_0", ge)
	}
	if want := "the result is not JSON: invalid character 's' looking for beginning of value"; ge.Reason != want {
		t.Errorf("reason %q, want %q", ge.Reason, want)
	}
	if ge.Details["tool"] != "locate" {
		t.Errorf("details %v, want the tool", ge.Details)
	}
}

func TestToolOutputSchema_ErrorResultsPass(t *testing.T) {
	g, err := guardrail.ToolOutputSchema(runtime.GuardSpec{}, json.RawMessage(pointSchema))
	if err != nil {
		t.Fatal(err)
	}
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "locate", `{}`), rt.Say("it failed")}}
	_, fin := run(t, m, g, []runtime.Tool{rt.Tool("locate", results(runtime.ErrorOutput("GPS offline")))})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
	if got := lastResult(t, m.Requests()[1]).Output; !got.IsError || got.Text != "GPS offline" {
		t.Errorf("the model read %+v, want the tool's own error", got)
	}
}

func TestToolOutputSchema_Check(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		out          runtime.Output
		want         string // the reason; "" passes
	}{
		{"object", pointSchema, runtime.Output{JSON: json.RawMessage(`{"x":1,"y":2}`)}, ""},
		{"object text", pointSchema, runtime.Output{Text: " {\"x\":1,\"y\":2}\n"}, ""},
		{"object mismatch", pointSchema, runtime.Output{JSON: json.RawMessage(`{"x":"1","y":2}`)},
			`validating root: validating /properties/x: type: 1 has type "string", want "number"`},
		{"not an object", pointSchema, runtime.Output{JSON: json.RawMessage(`[1,2]`)},
			`validating root: type: […] has type "array", want "object"`},
		{"empty", pointSchema, runtime.Output{}, "!the result is empty, not JSON"},
		{"bad JSON", pointSchema, runtime.Output{JSON: json.RawMessage(`{"x":`)}, "!the result is not JSON: unexpected end of JSON input"},
		{"media only", pointSchema, runtime.Output{Media: []runtime.Media{{MIMEType: "image/png"}}}, "!the result is empty, not JSON"},

		{"array", `{"type":"array","items":{"type":"integer"}}`, runtime.Output{Text: "[1, 2]"}, ""},
		{"array mismatch", `{"type":"array","items":{"type":"integer"}}`, runtime.Output{Text: `[1, "two"]`},
			`validating root: validating /items: type: two has type "string", want "integer"`},
		{"string", `{"type":"string","maxLength":3}`, runtime.Output{Text: `"abc"`}, ""},
		{"string mismatch", `{"type":"string","maxLength":3}`, runtime.Output{Text: `"abcd"`},
			`validating root: maxLength: "abcd" contains 4 Unicode code points, more than 3`},
		{"number", `{"type":"number","minimum":0}`, runtime.Output{Text: "3.5"}, ""},
		{"number mismatch", `{"type":"number","minimum":0}`, runtime.Output{Text: "-1"}, "validating root: minimum: -1/1 is less than 0.000000"},
		{"null", `{"type":"null"}`, runtime.Output{Text: "null"}, ""},
		{"plain text", `{"type":"string"}`, runtime.Output{Text: "hello"}, "!the result is not JSON: invalid character 'h' looking for beginning of value"},

		// References keep pointing where they did at the root.
		{"$defs", `{"type":"array","items":{"$ref":"#/$defs/n"},"$defs":{"n":{"type":"integer"}}}`, runtime.Output{Text: `[1,"a"]`},
			`validating root: validating /items: validating /$defs/n: type: a has type "string", want "integer"`},
		{"$defs pass", `{"type":"array","items":{"$ref":"#/$defs/n"},"$defs":{"n":{"type":"integer"}}}`, runtime.Output{Text: `[1,2]`}, ""},
		{"$ref to the root", `{"type":"array","items":{"$ref":"#"}}`, runtime.Output{Text: `[[],[[]],1]`},
			`validating root: validating /items: validating root: type: 1 has type "integer", want "array"`},
		{"$ref to the root pass", `{"type":"array","items":{"$ref":"#"}}`, runtime.Output{Text: `[[],[[]]]`}, ""},
		{"anchor", `{"type":"array","items":{"$ref":"#item"},"$defs":{"i":{"$anchor":"item","type":"boolean"}}}`, runtime.Output{Text: `[true,0]`},
			`validating root: validating /items: validating /$defs/i: type: 0 has type "integer", want "boolean"`},
		{"own $id", `{"$id":"https://example.com/list","type":"array","items":{"$ref":"#/$defs/n"},"$defs":{"n":{"type":"integer"}}}`, runtime.Output{Text: `["a"]`},
			`validating https://example.com/list: validating /items: validating /$defs/n: type: a has type "string", want "integer"`},
		{"draft-07 definitions", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":{"$ref":"#/definitions/n"},"definitions":{"n":{"type":"integer"}}}`, runtime.Output{Text: `[1.5]`},
			`validating root: validating /items: validating /definitions/n: type: 1.5 has type "number", want "integer"`},
		{"draft-07 root $ref", `{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/list","type":"object","definitions":{"list":{"type":"array","maxItems":1}}}`, runtime.Output{Text: `[1,2]`},
			`validating root: validating /definitions/list: maxItems: array length 2 is greater than 1`},
		{"draft-07 root $ref pass", `{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/list","type":"object","definitions":{"list":{"type":"array","maxItems":1}}}`, runtime.Output{Text: `[1]`}, ""},
		{"draft-07 root $ref, object", `{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/list","type":"object","definitions":{"list":{"type":"array","maxItems":1}}}`, runtime.Output{Text: `{}`},
			`validating root: validating /definitions/list: type: {} has type "object", want "array"`},
		{"draft-07 root $id with a fragment", `{"$schema":"http://json-schema.org/draft-07/schema#","$id":"https://example.com/s#top","type":"array","items":{"$ref":"#"}}`, runtime.Output{Text: `[[],[[]]]`}, ""},
		{"draft-07 root $id with a fragment, mismatch", `{"$schema":"http://json-schema.org/draft-07/schema#","$id":"https://example.com/s#top","type":"array","items":{"$ref":"#"}}`, runtime.Output{Text: `[[],1]`},
			`validating root: validating /items: validating root: type: 1 has type "integer", want "array"`},
		{"true", `true`, runtime.Output{Text: `"anything"`}, ""},
		{"false", `false`, runtime.Output{Text: `"anything"`}, "validating root: not: validated against <anonymous schema>"},
		{"false, object", `false`, runtime.Output{Text: `{}`}, "validating root: not: validated against <anonymous schema>"},
		{"empty schema", `{}`, runtime.Output{Text: `[{"a":null}]`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := guardrail.ToolOutputSchema(runtime.GuardSpec{}, json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			in := &runtime.GuardCheck{Stage: runtime.GuardToolOutput, Text: tc.out.String(), Call: runtime.ToolCall{ID: "call_1", Name: "t"}, Result: tc.out}
			var want *runtime.Trip
			switch {
			case strings.HasPrefix(tc.want, "!"):
				want = &runtime.Trip{Reason: tc.want[1:], Details: map[string]string{"tool": "t"}}
			case tc.want != "":
				want = &runtime.Trip{Reason: "the result does not match the schema: " + tc.want, Details: map[string]string{"tool": "t"}}
			}
			wantTrip(t, tc.out.String(), check(t, g, in), want)
		})
	}
}

func TestToolOutputSchema_CheckEndsWithItsContext(t *testing.T) {
	g, err := guardrail.ToolOutputSchema(runtime.GuardSpec{}, json.RawMessage(pointSchema))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	out := runtime.Output{JSON: json.RawMessage(`{"x":1,"y":2}`)}
	trip, err := g.Check(ctx, &runtime.GuardCheck{Stage: runtime.GuardToolOutput, Result: out})
	if trip != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Check with its context cancelled = %v, %v; want context.Canceled", trip, err)
	}
}

func TestToolOutputSchema_Spec(t *testing.T) {
	g, err := guardrail.ToolOutputSchema(runtime.GuardSpec{Stages: runtime.GuardInput | runtime.GuardOutput, OnToolTrip: runtime.GuardCorrect}, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := g.Guard(); s.Name != "tool_output_schema" || s.Stages != runtime.GuardToolOutput || s.OnToolTrip != runtime.GuardCorrect {
		t.Errorf("Guard() = %+v, want tool_output_schema at tool_output only, correcting", s)
	}
}

func TestToolOutputSchema_Errors(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         string
	}{
		{"none", "", "guardrail tool_output_schema: no schema"},
		{"blank", " \n", "guardrail tool_output_schema: no schema"},
		{"null", "null", "guardrail tool_output_schema: schema: not a JSON object or boolean"},
		{"array", "[]", "guardrail tool_output_schema: schema: not a JSON object or boolean"},
		{"not JSON", "{", "guardrail tool_output_schema: schema: not valid JSON"},
		{"unknown draft", `{"$schema":"http://json-schema.org/draft-04/schema#"}`,
			"guardrail tool_output_schema: schema: $schema: the draft http://json-schema.org/draft-04/schema# is not known; use 2020-12 or draft-07"},
		{"$schema not a string", `{"$schema":7}`, "guardrail tool_output_schema: schema: $schema: not a string"},
		{"bad pattern", `{"pattern":"("}`, "guardrail tool_output_schema: schema: "},
		{"unresolved $ref", `{"$ref":"#/$defs/missing"}`, "guardrail tool_output_schema: schema: "},
		{"draft-07 anchor at the root", `{"$schema":"http://json-schema.org/draft-07/schema#","$id":"#top","items":{"$ref":"#top"}}`,
			"guardrail tool_output_schema: schema: it cannot be applied to results other than objects: "},
	} {
		g, err := guardrail.ToolOutputSchema(runtime.GuardSpec{}, json.RawMessage(tc.schema))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: ToolOutputSchema = %v, %v; want an error starting %q", tc.name, g, err, tc.want)
		}
	}
	big := `{"description":"` + strings.Repeat("x", 70<<10) + `"}`
	if _, err := guardrail.ToolOutputSchema(runtime.GuardSpec{}, json.RawMessage(big)); !errors.Is(err, runtime.ErrSchemaTooComplex) {
		t.Errorf("ToolOutputSchema of a 70 KiB schema: %v, want it to wrap ErrSchemaTooComplex", err)
	}
}

func TestToolOutputSchema_ConcurrentChecks(t *testing.T) {
	// hooktest.Runs' tools echo their arguments, {"a":1} or {}.
	g, err := guardrail.ToolOutputSchema(runtime.GuardSpec{OnToolTrip: runtime.GuardCorrect}, json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	hooktest.Runs(t, g, 12)
}
