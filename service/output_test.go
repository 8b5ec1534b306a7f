package service_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

// weatherSchema is the output schema of the typed agents here.
const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"]}`

func typedScript(name string, steps ...rt.Step) scripted {
	return scripted{name: name, model: &rt.Model{Steps: steps}, goTools: []runtime.Tool{}, output: weatherSchema}
}

// A typed agent's result reaches the wire as run_finished.output, on a Run stream and
// from ExecuteRun, with final_text its compact JSON.
func TestOutput_ResultOnTheWire(t *testing.T) {
	answer := rt.Call(0, "final_answer", `{"city": "Oslo", "celsius": -3}`)
	c := newTestServer(t, service.Config{}, typedScript("stream", answer), typedScript("unary", answer)).Client

	fin, err := servicetest.Open(t, c, servicetest.Input("stream", "weather in Oslo?")).Finish()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("unary", "weather in Oslo?")})
	if err != nil {
		t.Fatal(err)
	}
	for name, fin := range map[string]*agentdv1.RunFinished{"Run": fin, "ExecuteRun": resp.GetResult()} {
		if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			t.Errorf("%s: finished %v, want completed", name, fin.GetReason())
		}
		if diff := cmp.Diff(map[string]any{"city": "Oslo", "celsius": -3.0}, fin.GetOutput().GetStructValue().AsMap()); diff != "" {
			t.Errorf("%s: output (-want +got):\n%s", name, diff)
		}
		if fin.GetFinalText() != `{"city":"Oslo","celsius":-3}` {
			t.Errorf("%s: final_text %q, want the answer as compact JSON", name, fin.GetFinalText())
		}
	}
}

// An agent whose answers never match its schema ends FAILED with OUTPUT_INVALID
// (ABORTED), every answer and correction kept in new_messages; ExecuteRun's status says
// the same.
func TestOutput_Invalid(t *testing.T) {
	wrong := []rt.Step{rt.Say("-3"), rt.Call(1, "final_answer", `{"city":"Oslo"}`), rt.Say("cold")}
	c := newTestServer(t, service.Config{}, typedScript("stream", wrong...), typedScript("unary", wrong...)).Client

	fin, err := servicetest.Open(t, c, servicetest.Input("stream", "weather in Oslo?")).Finish()
	if code, reason, _ := errorInfo(err); code != codes.Aborted || reason != "OUTPUT_INVALID" {
		t.Fatalf("the stream ended %v (%s), want ABORTED with OUTPUT_INVALID", err, reason)
	}
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_FAILED || fin.GetError().GetReason() != "OUTPUT_INVALID" || fin.GetOutput() != nil {
		t.Errorf("finished %v %v, output %v; want FAILED, OUTPUT_INVALID, no output", fin.GetReason(), fin.GetError(), fin.GetOutput())
	}
	var kept []string
	for _, m := range fin.GetNewMessages() {
		for _, p := range m.GetParts() {
			switch {
			case p.GetText() != "":
				kept = append(kept, p.GetText())
			case p.GetToolResult() != nil:
				kept = append(kept, p.GetToolResult().GetText())
			}
		}
	}
	if got := strings.Join(kept, " | "); !strings.Contains(got, "-3") || !strings.Contains(got, "celsius") || !strings.Contains(got, "cold") {
		t.Errorf("new_messages keep %q, want every answer and what was wrong with it", got)
	}

	_, err = c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("unary", "weather in Oslo?")})
	if code, reason, _ := errorInfo(err); code != codes.Aborted || reason != "OUTPUT_INVALID" {
		t.Errorf("ExecuteRun = %v (%s), want ABORTED with OUTPUT_INVALID", err, reason)
	}
}

// A run may ask for a typed result only where its agent allows it; where the agent has a
// schema of its own, the run's tightens it: an answer must match both.
func TestOutput_RunSchema(t *testing.T) {
	tight := `{"type":"object","properties":{"city":{"enum":["Oslo","Bergen"]}},"required":["city"]}`
	tightStruct := func() *structpb.Struct {
		var m map[string]any
		if err := json.Unmarshal([]byte(tight), &m); err != nil {
			t.Fatal(err)
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	allowed := typedScript("allowed",
		rt.Call(0, "final_answer", `{"city":"Paris","celsius":9}`), // the agent's schema yes, the run's no
		rt.Call(1, "final_answer", `{"city":"Bergen"}`),            // the run's yes, the agent's no
		rt.Call(2, "final_answer", `{"city":"Bergen","celsius":4}`),
	)
	allowed.runSchema = true
	plain := scripted{name: "plain", model: &rt.Model{Steps: []rt.Step{rt.Say("hi")}}, goTools: []runtime.Tool{}}
	untyped := scripted{name: "untyped", model: &rt.Model{Steps: []rt.Step{rt.Call(0, "final_answer", `{"city":"Oslo"}`)}}, goTools: []runtime.Tool{}, runSchema: true}
	c := newTestServer(t, service.Config{}, allowed, plain, untyped).Client

	start := func(agent string, schema *structpb.Struct) *agentdv1.RunSpec {
		s := servicetest.Input(agent, "weather?")
		s.Config = &agentdv1.RunConfig{OutputSchema: schema}
		return s
	}
	fin, err := servicetest.Open(t, c, start("allowed", tightStruct())).Finish()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"city": "Bergen", "celsius": 4.0}, fin.GetOutput().GetStructValue().AsMap()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	var refusals []string
	for _, m := range fin.GetNewMessages() {
		for _, p := range m.GetParts() {
			if r := p.GetToolResult(); r.GetIsError() {
				refusals = append(refusals, r.GetText())
			}
		}
	}
	if len(refusals) != 2 || !strings.Contains(refusals[0], "city") || !strings.Contains(refusals[1], "celsius") {
		t.Errorf("refusals %q, want the run's schema refusing the city, then the agent's the missing celsius", refusals)
	}

	// An untyped agent that allows it answers in the run's shape.
	resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: start("untyped", tightStruct())})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResult().GetOutput().GetStructValue().AsMap(); got["city"] != "Oslo" {
		t.Errorf("output %v, want the untyped agent's answer in the run's shape", got)
	}

	// An agent that does not allow it refuses the run, and says so.
	_, err = c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: start("plain", tightStruct())})
	if code, reason, _ := errorInfo(err); code != codes.PermissionDenied || reason != "OUTPUT_SCHEMA_NOT_ALLOWED" {
		t.Errorf("plain agent: %v (%s), want PERMISSION_DENIED OUTPUT_SCHEMA_NOT_ALLOWED", err, reason)
	}

	// A schema that is not an object schema, or past the validator's bounds, is refused
	// naming the field.
	for name, s := range map[string]*structpb.Struct{
		"an array root": {Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("array")}},
		"too big":       {Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("object"), "description": structpb.NewStringValue(strings.Repeat("x", 70<<10))}},
	} {
		_, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: start("allowed", s)})
		code, reason, br := errorInfo(err)
		if code != codes.InvalidArgument || reason != "INVALID_ARGUMENT" || len(br.GetFieldViolations()) == 0 || br.GetFieldViolations()[0].GetField() != "start.config.output_schema" {
			t.Errorf("%s: %v (%s, %v), want INVALID_ARGUMENT naming start.config.output_schema", name, err, reason, br)
		}
	}

	// ListAgents says which agents are typed and which let a run ask.
	list, err := c.ListAgents(t.Context(), &agentdv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list.GetAgents() {
		switch a.GetName() {
		case "allowed":
			if !a.GetRunOutputSchemaAllowed() || a.GetOutputSchema().GetFields()["required"] == nil {
				t.Errorf("allowed: %v, want its schema and run schemas allowed", a)
			}
		case "plain":
			if a.GetRunOutputSchemaAllowed() || a.GetOutputSchema() != nil {
				t.Errorf("plain: %v, want no schema, run schemas refused", a)
			}
		}
	}
}
