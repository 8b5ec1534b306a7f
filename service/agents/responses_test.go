package agents_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/servicetest"
)

// responsesSSE is a Responses API stream of the given output items' events, then
// response.completed.
func responsesSSE(events ...map[string]any) string {
	var b strings.Builder
	for i, ev := range append(events, map[string]any{"type": "response.completed", "response": map[string]any{
		"id": "resp_1", "status": "completed", "model": "o4-mini-2025-04-16", "output": []any{},
		"usage": map[string]any{"input_tokens": 300, "input_tokens_details": map[string]any{"cached_tokens": 256}, "output_tokens": 90, "output_tokens_details": map[string]any{"reasoning_tokens": 64}, "total_tokens": 390},
	}}) {
		ev["sequence_number"] = i
		data, _ := json.Marshal(ev)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", ev["type"], data)
	}
	return b.String()
}

// An openai-responses agent's reasoning survives a park: the run asks to approve
// save_note and ends AWAITING_INPUT; resumed from its continuation with the decision, it
// sends the model the reasoning item of the first call, encrypted content and all, ahead
// of the function call it led to, and the call's result after it. End to end through the
// service, against a fake Responses API.
func TestResponsesReasoningSurvivesAPark(t *testing.T) {
	var mu sync.Mutex
	var requests []map[string]any
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/responses" {
			http.NotFound(w, r)
			return
		}
		var req map[string]any
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &req)
		mu.Lock()
		requests = append(requests, req)
		n := len(requests)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			io.WriteString(w, responsesSSE(
				map[string]any{"type": "response.output_item.added", "output_index": 0, "item": map[string]any{"id": "rs_1", "type": "reasoning", "summary": []any{}}},
				map[string]any{"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "The user wants a note saved."},
				map[string]any{"type": "response.output_item.done", "output_index": 0, "item": map[string]any{"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAAABoSecretReasoning==", "summary": []any{map[string]any{"type": "summary_text", "text": "The user wants a note saved."}}}},
				map[string]any{"type": "response.output_item.added", "output_index": 1, "item": map[string]any{"id": "fc_1", "type": "function_call", "call_id": "call_note", "name": "save_note", "arguments": ""}},
				map[string]any{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": `{"title":"Milk","text":"buy milk"}`},
			))
			return
		}
		io.WriteString(w, responsesSSE(
			map[string]any{"type": "response.output_item.added", "output_index": 0, "item": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "content": []any{}}},
			map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Saved."},
		))
	}))
	defer fake.Close()
	path := writeAgentsFile(t, `
agents:
  - name: thinker
    model: openai-responses:o4-mini
    base_url: `+fake.URL+`/v1
    tools: [save_note]
`, nil)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	c := serveAgents(t, loadRegistry(t, path, nil))

	parked, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("thinker", "save a note: buy milk")})
	if err != nil {
		t.Fatal(err)
	}
	fin := parked.GetResult()
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || len(fin.GetPendingApprovals()) != 1 {
		t.Fatalf("first run ended %v with %d approvals pending, want AWAITING_INPUT with save_note's", fin.GetReason(), len(fin.GetPendingApprovals()))
	}
	if u := fin.GetUsage(); u.GetReasoningTokens() != 64 || u.GetCacheReadInputTokens() != 256 {
		t.Errorf("usage %v, want 64 reasoning and 256 cached tokens", u)
	}
	resumed, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{
		Agent: "thinker", ThreadId: parked.GetThreadId(), Messages: fin.GetNewMessages(), Continuation: fin.GetContinuation(),
		Decisions: []*agentdv1.ApprovalDecision{{ApprovalId: fin.GetPendingApprovals()[0].GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resumed.GetResult().GetFinalText(); got != "Saved." {
		t.Fatalf("resumed run answered %q (%v), want Saved.", got, resumed.GetResult().GetReason())
	}

	mu.Lock()
	defer mu.Unlock()
	if len(requests) != 2 {
		t.Fatalf("%d requests, want 2", len(requests))
	}
	var types []string
	var reasoning map[string]any
	for _, it := range requests[1]["input"].([]any) {
		item := it.(map[string]any)
		typ, _ := item["type"].(string)
		types = append(types, typ)
		if typ == "reasoning" {
			reasoning = item
		}
	}
	if strings.Join(types, ",") != ",reasoning,function_call,function_call_output" {
		t.Errorf("second request's input items %q, want the user's message, the reasoning, the call, its output", types)
	}
	if reasoning["id"] != "rs_1" || reasoning["encrypted_content"] != "gAAAAABoSecretReasoning==" {
		t.Errorf("the reasoning item sent back is %v, want rs_1 with its encrypted content", reasoning)
	}
	if requests[1]["store"] != false {
		t.Errorf("store = %v, want false", requests[1]["store"])
	}
}
