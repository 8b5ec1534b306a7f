package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
)

var _ runtime.ForcedToolModel = (*anthropic.Model)(nil)

// A typed run whose only tool is its output tool forces the call (tool_choice), unless
// extended thinking is on, which the API refuses a forced tool with.
func TestForcedToolRequest(t *testing.T) {
	req := func() *runtime.ModelRequest {
		return &runtime.ModelRequest{
			Messages:   []runtime.Message{runtime.UserMessage("weather in Oslo?")},
			Tools:      []runtime.ToolSpec{{Name: "final_answer", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
			ToolChoice: "final_answer",
		}
	}
	m, srv := newModel(t, anthropic.Config{}, sse("answer.sse"))
	if !m.ForcesTool() {
		t.Fatal("ForcesTool is false without thinking")
	}
	if _, err := ssetest.Collect(t, t.Context(), m, req()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"type": "tool", "name": "final_answer"}, srv.Requests()[0].JSON["tool_choice"]); diff != "" {
		t.Errorf("tool_choice (-want +got):\n%s", diff)
	}

	thinking, tsrv := newModel(t, anthropic.Config{ThinkingBudget: 1024, MaxTokens: 4096}, sse("answer.sse"))
	if thinking.ForcesTool() {
		t.Error("ForcesTool is true with extended thinking")
	}
	if _, err := ssetest.Collect(t, t.Context(), thinking, req()); err != nil {
		t.Fatal(err)
	}
	if got, ok := tsrv.Requests()[0].JSON["tool_choice"]; ok {
		t.Errorf("tool_choice %v sent with extended thinking", got)
	}
}
