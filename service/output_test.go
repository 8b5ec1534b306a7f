package service_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

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
