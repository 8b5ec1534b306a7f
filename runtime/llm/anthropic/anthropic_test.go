package anthropic_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/internal/provider/providertest"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newModel returns a model with cfg's settings on a fake server that answers with
// replies.
func newModel(t *testing.T, cfg anthropic.Config, replies ...ssetest.Reply) (*anthropic.Model, *ssetest.Server) {
	t.Helper()
	srv := ssetest.New(t, adapter.Path, replies...)
	if cfg.Model == "" {
		cfg.Model = adapter.Model
	}
	cfg.BaseURL, cfg.APIKey, cfg.HTTPClient = srv.URL, providertest.Key, srv.Client()
	return providertest.Must[*anthropic.Model](t)(anthropic.New(cfg)), srv
}

func sse(name string) ssetest.Reply { return ssetest.Reply{File: "testdata/" + name} }

func state(s string) runtime.ModelEvent { return rt.ReasoningState([]byte(s + "\n")) }

func TestStream(t *testing.T) {
	providertest.TestStream(t, adapter, []providertest.Recording{{
		File: "text.sse", Events: adapter.Text,
	}, {
		File: "thinking.sse",
		Events: []runtime.ModelEvent{
			rt.Reasoning("The user asks for 6*7."), rt.Reasoning(" That is 42."),
			state(`{"type":"thinking","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds","text_bytes":34}`),
			state(`{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}`),
			rt.Text("6*7 is"), rt.Text(" 42."),
			ssetest.Usage(runtime.Usage{InputTokens: 40, OutputTokens: 88}),
			rt.Finish(runtime.FinishStop),
		},
	}, {
		File: "tool_use.sse",
		Events: []runtime.ModelEvent{
			rt.Text("I'll check"), rt.Text(" the weather."),
			rt.ToolDelta(1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", ""),
			rt.ToolDelta(1, "", "", `{"location":`), rt.ToolDelta(1, "", "", ` "San Fra`), rt.ToolDelta(1, "", "", `ncisco, CA"`),
			rt.ToolDelta(1, "", "", `, "unit": "fah`), rt.ToolDelta(1, "", "", `renheit"}`),
			ssetest.Usage(runtime.Usage{InputTokens: 472, OutputTokens: 89}),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		File: "parallel_tool_use.sse",
		Events: []runtime.ModelEvent{
			rt.ToolDelta(0, "toolu_paris", "get_weather", ""), rt.ToolDelta(0, "", "", `{"location": "Paris"}`),
			rt.ToolDelta(1, "toolu_time", "current_time", ""), rt.ToolDelta(1, "", "", `{}`),
			ssetest.Usage(runtime.Usage{InputTokens: 500, OutputTokens: 60}),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		// Raw bytes pass through unchanged: the runtime joins split characters.
		File: "split_multibyte.sse",
		Events: []runtime.ModelEvent{
			rt.Text("Gr\xc3"), rt.Text("\xbcezi, "),
			rt.ToolDelta(1, "toolu_zurich", "get_weather", ""),
			rt.ToolDelta(1, "", "", `{"location":"Z`+"\xc3"), rt.ToolDelta(1, "", "", "\xbc"+`rich","near":"`+"\xe6"),
			rt.ToolDelta(1, "", "", "\x9d\xb1\xe4\xba"), rt.ToolDelta(1, "", "", "\xac"+`"}`),
			ssetest.Usage(runtime.Usage{InputTokens: 30, OutputTokens: 40}),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		File:   "refusal.sse",
		Events: []runtime.ModelEvent{rt.Text("I can't help with that."), ssetest.Usage(runtime.Usage{InputTokens: 20, OutputTokens: 9}), rt.Finish(runtime.FinishContentFilter)},
	}, {
		File:   "max_tokens.sse",
		Events: []runtime.ModelEvent{rt.Text("A very long"), ssetest.Usage(runtime.Usage{InputTokens: 20, OutputTokens: 3}), rt.Finish(runtime.FinishLength)},
	}})
}

func TestToolCallsAssemble(t *testing.T) {
	providertest.TestAssemble(t, adapter, []providertest.Assembly{
		{File: "tool_use.sse", Text: "I'll check the weather.", Calls: []providertest.Call{
			{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Args: `{"location": "San Francisco, CA", "unit": "fahrenheit"}`},
		}},
		{File: "parallel_tool_use.sse", Calls: []providertest.Call{
			{ID: "toolu_paris", Name: "get_weather", Args: `{"location": "Paris"}`}, {ID: "toolu_time", Name: "current_time", Args: `{}`},
		}},
		{File: "split_multibyte.sse", Text: "Grüezi, ", Calls: []providertest.Call{
			{ID: "toolu_zurich", Name: "get_weather", Args: `{"location":"Zürich","near":"東京"}`},
		}},
	})
}

// TestRoundTrip streams replies, lets the runtime assemble them, and checks that the
// assembled messages convert back to the blocks the API sent: thinking with its
// signature, redacted thinking, text, tool use, even where the runtime joined adjacent
// reasoning blocks into one part.
func TestRoundTrip(t *testing.T) {
	m, srv := newModel(t, anthropic.Config{ThinkingBudget: 2048, NoPromptCache: true}, sse("thinking.sse"), sse("thinking_tool_use.sse"), sse("answer.sse"))
	first, _ := providertest.Assemble(t, m)
	if n := len(first.Parts); n != 2 {
		t.Fatalf("the runtime assembled %d parts, want 2 (reasoning joined, text): %s", n, rt.RenderMessage(first))
	}
	second, _ := providertest.Assemble(t, m, "get_weather")
	results := runtime.Message{Role: runtime.RoleTool, Parts: []runtime.Part{{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{
		CallID: "toolu_paris", Name: "get_weather", Output: runtime.Output{JSON: json.RawMessage(`{"celsius":15}`)},
	}}}}
	req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("6*7?"), first, runtime.UserMessage("Weather in Paris?"), second, results}}
	if _, err := ssetest.Collect(t, t.Context(), m, req); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[2].JSON
	want := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "6*7?"}}},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": "The user asks for 6*7. That is 42.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
			map[string]any{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
			map[string]any{"type": "text", "text": "6*7 is 42."},
		}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Weather in Paris?"}}},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": "I need the weather in Paris.", "signature": "sig-tool-turn"},
			map[string]any{"type": "tool_use", "id": "toolu_paris", "name": "get_weather", "input": map[string]any{"location": "Paris"}},
		}},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_paris", "content": []any{map[string]any{"type": "text", "text": `{"celsius":15}`}}},
		}},
	}
	if diff := cmp.Diff(want, got["messages"]); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "enabled", "budget_tokens": 2048.0}, got["thinking"]); diff != "" {
		t.Errorf("thinking (-want +got):\n%s", diff)
	}
	if got, want := got["max_tokens"], float64(anthropic.DefaultMaxTokens+2048); got != want {
		t.Errorf("max_tokens = %v, want %v", got, want)
	}
}

// TestRequest checks the request the server gets for a transcript holding every kind of
// part: messages, tools and tool results in the Messages API's shape, and the prompt
// cache's breakpoints (on by default): the last tool, the system prompt, and the last
// block of each of the last two messages.
func TestRequest(t *testing.T) {
	m, srv := newModel(t, anthropic.Config{}, sse("answer.sse"))
	req := &runtime.ModelRequest{
		Messages: []runtime.Message{
			runtime.SystemMessage("You are terse."),
			{Role: runtime.RoleUser, Parts: []runtime.Part{
				runtime.TextPart("What is in this picture, and what is 6*7?"),
				{Kind: runtime.PartMedia, Media: runtime.Media{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}},
			}},
			{Role: runtime.RoleAssistant, Parts: []runtime.Part{
				// Reasoning from another provider, unsigned, is left out.
				{Kind: runtime.PartReasoning, Text: "I should calculate."},
				runtime.TextPart("Let me check."),
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "toolu_1", Name: "calculate", Arguments: `{"expression": "6*7"}`}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "toolu_2", Name: "describe", Arguments: `not json`}},
			}},
			{Role: runtime.RoleTool, Parts: []runtime.Part{
				{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{CallID: "toolu_1", Name: "calculate", Output: runtime.Output{JSON: json.RawMessage(`{"result":42}`)}}},
				{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{CallID: "toolu_2", Name: "describe", Output: runtime.Output{
					Text: "tool describe got invalid JSON arguments", IsError: true,
				}}},
			}},
			// A steer after the results joins their turn.
			runtime.UserMessage("Go on."),
		},
		Tools: []runtime.ToolSpec{
			{Name: "calculate", Description: "Evaluates arithmetic.", Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"],"additionalProperties":false}`)},
			{Name: "describe"},
		},
		Settings: runtime.CallSettings{MaxOutputTokens: 1000, Extra: map[string]json.RawMessage{"metadata": json.RawMessage(`{"user_id":"u-1"}`)}},
	}
	if _, err := ssetest.Collect(t, t.Context(), m, req); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	ephemeral := map[string]any{"type": "ephemeral"}
	want := map[string]any{
		"model":      "claude-sonnet-4-5",
		"stream":     true,
		"max_tokens": 1000.0,
		"metadata":   map[string]any{"user_id": "u-1"},
		"system":     []any{map[string]any{"type": "text", "text": "You are terse.", "cache_control": ephemeral}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "What is in this picture, and what is 6*7?"},
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
			}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": "Let me check."},
				map[string]any{"type": "tool_use", "id": "toolu_1", "name": "calculate", "input": map[string]any{"expression": "6*7"}},
				map[string]any{"type": "tool_use", "id": "toolu_2", "name": "describe", "input": map[string]any{}, "cache_control": ephemeral},
			}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{map[string]any{"type": "text", "text": `{"result":42}`}}},
				map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": []any{map[string]any{"type": "text", "text": "tool describe got invalid JSON arguments"}}},
				map[string]any{"type": "text", "text": "Go on.", "cache_control": ephemeral},
			}},
		},
		"tools": []any{
			map[string]any{"name": "calculate", "description": "Evaluates arithmetic.", "input_schema": map[string]any{
				"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}},
				"required": []any{"expression"}, "additionalProperties": false,
			}},
			map[string]any{"name": "describe", "input_schema": map[string]any{"type": "object", "properties": map[string]any{}}, "cache_control": ephemeral},
		},
	}
	if diff := cmp.Diff(want, got.JSON); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if got := got.Header.Get("Authorization"); got != "Bearer "+providertest.Key {
		t.Errorf("Authorization = %q, want the key", got)
	}
	if got.Header.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
}

func TestNewThinkingBudget(t *testing.T) {
	if _, err := anthropic.New(anthropic.Config{Model: adapter.Model, APIKey: providertest.Key, MaxTokens: 1000, ThinkingBudget: 1000}); err == nil {
		t.Error("New with a thinking budget not below max tokens succeeded")
	}
}

// With NoPromptCache no request carries a cache breakpoint; with it on, a call's usage
// reports what the cache read and wrote, and counts both in the input.
func TestPromptCache(t *testing.T) {
	req := &runtime.ModelRequest{
		Messages: []runtime.Message{runtime.SystemMessage("You are terse."), runtime.UserMessage("Hello")},
		Tools:    []runtime.ToolSpec{{Name: "calculate"}},
	}
	m, srv := newModel(t, anthropic.Config{NoPromptCache: true}, sse("text.sse"))
	if _, err := ssetest.Collect(t, t.Context(), m, req); err != nil {
		t.Fatal(err)
	}
	if body := string(srv.Requests()[0].Body); strings.Contains(body, "cache_control") {
		t.Errorf("with NoPromptCache the request carries cache_control: %s", body)
	}

	m, srv = newModel(t, anthropic.Config{}, sse("text.sse"))
	events, err := ssetest.Collect(t, t.Context(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(srv.Requests()[0].Body), `"cache_control":{"type":"ephemeral"}`); n != 3 {
		t.Errorf("%d cache breakpoints, want 3 (the tool, the system prompt, the one message): %s", n, srv.Requests()[0].Body)
	}
	var usage runtime.Usage
	for _, ev := range events {
		if ev.Kind == runtime.ModelUsage {
			usage = ev.Usage
		}
	}
	// text.sse: 25 uncached input tokens, 50 written to the cache, 100 read from it.
	if usage.CacheReadInputTokens != 100 || usage.CacheCreationInputTokens != 50 || usage.InputTokens != 175 {
		t.Errorf("usage %+v, want 100 read from the cache, 50 written, 175 input in all", usage)
	}
}
