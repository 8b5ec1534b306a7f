package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	"github.com/agentd/agentd/runtime/llm/openai"
)

var _ runtime.NativeOutputModel = (*openai.Model)(nil)

const outputSchema = `{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"]}`

// typedRequest is a typed run's request, and its schema decoded.
func typedRequest(t *testing.T) (*runtime.ModelRequest, map[string]any) {
	var schema map[string]any
	if err := json.Unmarshal([]byte(outputSchema), &schema); err != nil {
		t.Fatal(err)
	}
	return &runtime.ModelRequest{
		Messages: []runtime.Message{runtime.UserMessage("weather in Oslo?")},
		Output:   &runtime.OutputFormat{Name: "final_answer", Schema: json.RawMessage(outputSchema)},
	}, schema
}

// A typed run's request asks for JSON matching its schema: response_format on Chat
// Completions, strict off for a schema outside strict mode's subset (agentd validates the
// reply either way).
func TestOutputFormatRequest(t *testing.T) {
	req, schema := typedRequest(t)
	var m runtime.Model = &openai.Model{}
	if nm, ok := m.(runtime.NativeOutputModel); !ok || !nm.NativeOutput() {
		t.Fatal("the OpenAI model is not a NativeOutputModel")
	}

	chat, srv := newModel(t, openai.Config{}, sse("answer.sse"))
	if _, err := ssetest.Collect(t, t.Context(), chat, req); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "final_answer", "schema": schema, "strict": false}}
	if diff := cmp.Diff(want, srv.Requests()[0].JSON["response_format"]); diff != "" {
		t.Errorf("chat response_format (-want +got):\n%s", diff)
	}
}

// On the Responses API the format is text.format.
func TestResponsesOutputFormatRequest(t *testing.T) {
	inResponses(t)
	req, schema := typedRequest(t)
	resp, rsrv := newResponsesModel(t, openai.Config{}, sse("text.sse"))
	if _, err := ssetest.Collect(t, t.Context(), resp, req); err != nil {
		t.Fatal(err)
	}
	wantText := map[string]any{"format": map[string]any{"type": "json_schema", "name": "final_answer", "schema": schema, "strict": false}}
	if diff := cmp.Diff(wantText, rsrv.Requests()[0].JSON["text"]); diff != "" {
		t.Errorf("responses text (-want +got):\n%s", diff)
	}
}

// A schema within strict mode's subset goes with strict on, on both APIs: the reply then
// matches by construction.
func TestOutputFormatStrict(t *testing.T) {
	closed := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	req := &runtime.ModelRequest{
		Messages: []runtime.Message{runtime.UserMessage("weather in Oslo?")},
		Output:   &runtime.OutputFormat{Name: "final_answer", Schema: json.RawMessage(closed)},
	}
	chat, srv := newModel(t, openai.Config{}, sse("answer.sse"))
	if _, err := ssetest.Collect(t, t.Context(), chat, req); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].JSON["response_format"].(map[string]any)["json_schema"].(map[string]any)["strict"]; got != true {
		t.Errorf("chat: strict %v, want true", got)
	}
	inResponses(t)
	resp, rsrv := newResponsesModel(t, openai.Config{}, sse("text.sse"))
	if _, err := ssetest.Collect(t, t.Context(), resp, req); err != nil {
		t.Fatal(err)
	}
	if got := rsrv.Requests()[0].JSON["text"].(map[string]any)["format"].(map[string]any)["strict"]; got != true {
		t.Errorf("responses: strict %v, want true", got)
	}
}
