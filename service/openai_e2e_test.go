package service_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime/llm/openai"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// fakeOpenAI is an OpenAI-compatible server scripting one tool call: asked a question,
// it calls calculate with {"expression":"6*7"}, streaming the arguments in fragments;
// given the tool's result, it answers from it.
type fakeOpenAI struct {
	t    *testing.T
	mu   sync.Mutex
	reqs []map[string]any
	auth []string
}

func (f *fakeOpenAI) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.reqs...)
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.t.Errorf("got %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.t.Errorf("request body: %v", err)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, body)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta map[string]any, finish any, usage any) {
		choices := []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		if delta == nil {
			choices = []any{}
		}
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 1735689600, "model": "fake-model",
			"choices": choices, "usage": usage,
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	msgs, _ := body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	if last["role"] == "tool" {
		send(map[string]any{"role": "assistant", "content": ""}, nil, nil)
		send(map[string]any{"content": "6*7"}, nil, nil)
		send(map[string]any{"content": " = 42."}, nil, nil)
		send(map[string]any{}, "stop", nil)
		send(nil, nil, map[string]any{"prompt_tokens": 150, "completion_tokens": 8, "total_tokens": 158})
	} else {
		call := func(args string, first bool) map[string]any {
			tc := map[string]any{"index": 0, "function": map[string]any{"arguments": args}}
			if first {
				tc["id"], tc["type"] = "call_calc", "function"
				tc["function"].(map[string]any)["name"] = "calculate"
			}
			return map[string]any{"tool_calls": []any{tc}}
		}
		send(map[string]any{"role": "assistant", "content": nil, "tool_calls": call("", true)["tool_calls"]}, nil, nil)
		for _, frag := range []string{`{"expr`, `ession":`, `"6*7"}`} {
			send(call(frag, false), nil, nil)
		}
		send(map[string]any{}, "tool_calls", nil)
		send(nil, nil, map[string]any{"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestOpenAIEndToEnd runs agentd's default agent on the openai adapter, pointed at a
// fake server that scripts a tool call: the client sees the call's deltas, the tool's
// result and the final text, and the server sees the tool's result in Chat Completions'
// shape.
func TestOpenAIEndToEnd(t *testing.T) {
	fake := &fakeOpenAI{t: t}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	provider := agents.OpenAIModelProvider(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-e2e-key", HTTPClient: srv.Client()})
	logger := slog.New(slog.DiscardHandler)
	reg, err := agents.NewRegistry(agents.Default(), agents.RegistryOptions{
		ModelOverride: "openai:fake-model",
		Resolve:       agents.NewModelResolver(append(agents.BuiltinModelProviders(0), provider)...),
		Logger:        logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if def, _ := reg.Agent(""); def.Runtime.Model().Name() != "openai:fake-model" {
		t.Fatalf("default agent's model = %q, want openai:fake-model", def.Runtime.Model().Name())
	}
	c := servicetest.NewServer(t, service.Config{Agents: reg, Logger: logger, Config: runs.Config{ContinuationKey: testKey}}).Client

	s := servicetest.Open(t, c, servicetest.Input("", "what is 6*7?"))
	fin, err := s.Finish()
	if err != nil {
		t.Fatalf("stream ended with %v; events:\n%s", err, servicetest.Render(s.Events()))
	}
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetFinalText() != "6*7 = 42." {
		t.Fatalf("run finished %v %q, want completed with the model's answer; events:\n%s", fin.GetReason(), fin.GetFinalText(), servicetest.Render(s.Events()))
	}

	var started *agentdv1.ToolCallStarted
	var args, text strings.Builder
	var done *agentdv1.ToolCallArgsDone
	var result *agentdv1.ToolCallResult
	for _, ev := range s.Events() {
		switch {
		case ev.GetToolCallStarted() != nil:
			started = ev.GetToolCallStarted()
		case ev.GetToolCallArgsDelta() != nil:
			args.WriteString(ev.GetToolCallArgsDelta().GetDelta())
		case ev.GetToolCallArgsDone() != nil:
			done = ev.GetToolCallArgsDone()
		case ev.GetToolCallResult() != nil:
			result = ev.GetToolCallResult()
		case ev.GetTextDelta() != nil:
			text.WriteString(ev.GetTextDelta().GetDelta())
		}
	}
	if started.GetToolCallId() != "call_calc" || started.GetName() != "calculate" {
		t.Errorf("tool_call_started %v, want call_calc calling calculate", started)
	}
	if args.String() != `{"expression":"6*7"}` || done.GetArgumentsJson() != `{"expression":"6*7"}` {
		t.Errorf("argument deltas %q, done %q; want {\"expression\":\"6*7\"}", args.String(), done.GetArgumentsJson())
	}
	if result.GetToolCallId() != "call_calc" || result.GetIsError() || result.GetJson().GetStructValue().GetFields()["result"].GetNumberValue() != 42 {
		t.Errorf("tool_call_result %v, want 42 for call_calc", result)
	}
	if text.String() != "6*7 = 42." {
		t.Errorf("text deltas %q, want %q", text.String(), "6*7 = 42.")
	}
	if u := fin.GetUsage(); u.GetInputTokens() != 270 || u.GetOutputTokens() != 28 || u.GetModelCalls() != 2 {
		t.Errorf("usage %v, want 270 in, 28 out, 2 model calls", u)
	}

	reqs := fake.requests()
	if len(reqs) != 2 {
		t.Fatalf("the server got %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r["model"] != "fake-model" || r["stream"] != true {
			t.Errorf("request %d: model %v, stream %v", i, r["model"], r["stream"])
		}
		if fake.auth[i] != "Bearer sk-e2e-key" {
			t.Errorf("request %d: Authorization %q", i, fake.auth[i])
		}
	}
	var tools []string
	for _, tool := range reqs[0]["tools"].([]any) {
		tools = append(tools, tool.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	if diff := cmp.Diff([]string{"current_time", "calculate", "save_note"}, tools); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}
	msgs := reqs[1]["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("second request has %d messages, want system, user, assistant, tool: %v", len(msgs), msgs)
	}
	wantTail := []any{
		map[string]any{"role": "user", "content": "what is 6*7?"},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"id": "call_calc", "type": "function", "function": map[string]any{"name": "calculate", "arguments": `{"expression":"6*7"}`},
		}}},
	}
	if diff := cmp.Diff(wantTail, msgs[1:3]); diff != "" {
		t.Errorf("second request's user and assistant messages (-want +got):\n%s", diff)
	}
	if role := msgs[0].(map[string]any)["role"]; role != "system" {
		t.Errorf("first message's role %v, want system", role)
	}
	toolMsg := msgs[3].(map[string]any)
	var out map[string]any
	if err := json.Unmarshal([]byte(toolMsg["content"].(string)), &out); err != nil || toolMsg["role"] != "tool" || toolMsg["tool_call_id"] != "call_calc" || out["result"] != 42.0 {
		t.Errorf("tool message %v, want the result 42 for call_calc", toolMsg)
	}
}
