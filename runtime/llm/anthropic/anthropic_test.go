package anthropic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

const testKey = "sk-ant-test-0123456789abcdef"

// newModel returns a model on a fake server that answers with replies.
func newModel(t *testing.T, cfg anthropic.Config, replies ...ssetest.Reply) (*anthropic.Model, *ssetest.Server, *ssetest.Sleeps) {
	t.Helper()
	srv := ssetest.New(t, "/v1/messages", replies...)
	if cfg.Model == "" {
		cfg.Model = "claude-sonnet-4-5"
	}
	cfg.BaseURL, cfg.APIKey, cfg.HTTPClient = srv.URL, testKey, srv.Client()
	m, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := new(ssetest.Sleeps)
	anthropic.SetSleep(m, s.Sleep)
	return m, srv, s
}

func sse(name string) ssetest.Reply { return ssetest.Reply{File: "testdata/" + name} }

var hello = &runtime.ModelRequest{Messages: []runtime.Message{runtime.SystemMessage("Be brief."), runtime.UserMessage("Hello")}}

func state(s string) runtime.ModelEvent { return rt.ReasoningState([]byte(s + "\n")) }

func TestName(t *testing.T) {
	m, _, _ := newModel(t, anthropic.Config{Model: "claude-opus-4-1"})
	if got, want := m.Name(), "anthropic:claude-opus-4-1"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}

func TestStream(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []runtime.ModelEvent
	}{{
		file: "text.sse",
		want: []runtime.ModelEvent{
			rt.Text("Hello"), rt.Text("! How can"), rt.Text(" I help you today?"),
			// input_tokens 25 plus 100 read from the cache and 50 written to it.
			ssetest.Usage(runtime.Usage{InputTokens: 175, OutputTokens: 15, CacheReadInputTokens: 100, CacheCreationInputTokens: 50}),
			rt.Finish(runtime.FinishStop),
		},
	}, {
		file: "thinking.sse",
		want: []runtime.ModelEvent{
			rt.Reasoning("The user asks for 6*7."), rt.Reasoning(" That is 42."),
			state(`{"type":"thinking","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds","text_bytes":34}`),
			state(`{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}`),
			rt.Text("6*7 is"), rt.Text(" 42."),
			ssetest.Usage(runtime.Usage{InputTokens: 40, OutputTokens: 88}),
			rt.Finish(runtime.FinishStop),
		},
	}, {
		file: "tool_use.sse",
		want: []runtime.ModelEvent{
			rt.Text("I'll check"), rt.Text(" the weather."),
			rt.ToolDelta(1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", ""),
			rt.ToolDelta(1, "", "", `{"location":`), rt.ToolDelta(1, "", "", ` "San Fra`), rt.ToolDelta(1, "", "", `ncisco, CA"`),
			rt.ToolDelta(1, "", "", `, "unit": "fah`), rt.ToolDelta(1, "", "", `renheit"}`),
			ssetest.Usage(runtime.Usage{InputTokens: 472, OutputTokens: 89}),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		file: "parallel_tool_use.sse",
		want: []runtime.ModelEvent{
			rt.ToolDelta(0, "toolu_paris", "get_weather", ""), rt.ToolDelta(0, "", "", `{"location": "Paris"}`),
			rt.ToolDelta(1, "toolu_time", "current_time", ""), rt.ToolDelta(1, "", "", `{}`),
			ssetest.Usage(runtime.Usage{InputTokens: 500, OutputTokens: 60}),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		// Raw bytes pass through unchanged: the runtime joins split characters.
		file: "split_multibyte.sse",
		want: []runtime.ModelEvent{
			rt.Text("Gr\xc3"), rt.Text("\xbcezi, "),
			rt.ToolDelta(1, "toolu_zurich", "get_weather", ""),
			rt.ToolDelta(1, "", "", `{"location":"Z`+"\xc3"), rt.ToolDelta(1, "", "", "\xbc"+`rich","near":"`+"\xe6"),
			rt.ToolDelta(1, "", "", "\x9d\xb1\xe4\xba"), rt.ToolDelta(1, "", "", "\xac"+`"}`),
			ssetest.Usage(runtime.Usage{InputTokens: 30, OutputTokens: 40}),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		file: "refusal.sse",
		want: []runtime.ModelEvent{rt.Text("I can't help with that."), ssetest.Usage(runtime.Usage{InputTokens: 20, OutputTokens: 9}), rt.Finish(runtime.FinishContentFilter)},
	}, {
		file: "max_tokens.sse",
		want: []runtime.ModelEvent{rt.Text("A very long"), ssetest.Usage(runtime.Usage{InputTokens: 20, OutputTokens: 3}), rt.Finish(runtime.FinishLength)},
	}} {
		t.Run(strings.TrimSuffix(tc.file, ".sse"), func(t *testing.T) {
			m, srv, _ := newModel(t, anthropic.Config{}, sse(tc.file))
			got, err := ssetest.Collect(t, t.Context(), m, hello)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestToolCallsAssemble(t *testing.T) {
	type call struct{ ID, Name, Args string }
	for _, tc := range []struct {
		file string
		want []call
	}{
		{"tool_use.sse", []call{{"toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", `{"location": "San Francisco, CA", "unit": "fahrenheit"}`}}},
		{"parallel_tool_use.sse", []call{{"toolu_paris", "get_weather", `{"location": "Paris"}`}, {"toolu_time", "current_time", `{}`}}},
		{"split_multibyte.sse", []call{{"toolu_zurich", "get_weather", `{"location":"Zürich","near":"東京"}`}}},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".sse"), func(t *testing.T) {
			m, _, _ := newModel(t, anthropic.Config{}, sse(tc.file))
			msg, evs := providertest.Assemble(t, m, "get_weather", "current_time")
			var got []call
			for _, c := range msg.ToolCalls() {
				got = append(got, call{c.ID, c.Name, c.Arguments})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			for _, ev := range evs {
				var delta string
				switch ev := ev.(type) {
				case *runtime.TextDelta:
					delta = ev.Delta
				case *runtime.ToolCallArgsDelta:
					delta = ev.Delta
				}
				if !utf8.ValidString(delta) {
					t.Errorf("event %s carries a broken character", rt.RenderEvent(ev))
				}
			}
		})
	}
}

// TestRoundTrip streams replies, lets the runtime assemble them, and checks that the
// assembled messages convert back to the blocks the API sent: thinking with its
// signature, redacted thinking, text, tool use, even where the runtime joined adjacent
// reasoning blocks into one part.
func TestRoundTrip(t *testing.T) {
	m, srv, _ := newModel(t, anthropic.Config{ThinkingBudget: 2048}, sse("thinking.sse"), sse("thinking_tool_use.sse"), sse("answer.sse"))
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
// part: messages, tools and tool results in the Messages API's shape.
func TestRequest(t *testing.T) {
	m, srv, _ := newModel(t, anthropic.Config{}, sse("answer.sse"))
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
	want := map[string]any{
		"model":      "claude-sonnet-4-5",
		"stream":     true,
		"max_tokens": 1000.0,
		"metadata":   map[string]any{"user_id": "u-1"},
		"system":     []any{map[string]any{"type": "text", "text": "You are terse."}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "What is in this picture, and what is 6*7?"},
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
			}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": "Let me check."},
				map[string]any{"type": "tool_use", "id": "toolu_1", "name": "calculate", "input": map[string]any{"expression": "6*7"}},
				map[string]any{"type": "tool_use", "id": "toolu_2", "name": "describe", "input": map[string]any{}},
			}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{map[string]any{"type": "text", "text": `{"result":42}`}}},
				map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": []any{map[string]any{"type": "text", "text": "tool describe got invalid JSON arguments"}}},
				map[string]any{"type": "text", "text": "Go on."},
			}},
		},
		"tools": []any{
			map[string]any{"name": "calculate", "description": "Evaluates arithmetic.", "input_schema": map[string]any{
				"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}},
				"required": []any{"expression"}, "additionalProperties": false,
			}},
			map[string]any{"name": "describe", "input_schema": map[string]any{"type": "object", "properties": map[string]any{}}},
		},
	}
	if diff := cmp.Diff(want, got.JSON); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if got := got.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q, want the key", got)
	}
	if got.Header.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
}

// providerError returns err as a *ProviderError, failing t if it is not one.
func providerError(t *testing.T, err error) *anthropic.ProviderError {
	t.Helper()
	pe, ok := errors.AsType[*anthropic.ProviderError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *ProviderError", err, err)
	}
	return pe
}

func TestNoStopReason(t *testing.T) {
	m, srv, _ := newModel(t, anthropic.Config{}, sse("no_stop_reason.sse"))
	evs, err := ssetest.Collect(t, t.Context(), m, hello)
	if diff := cmp.Diff([]runtime.ModelEvent{rt.Text("The answer is"), rt.Text(" 42")}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !errors.Is(err, runtime.ErrMissingFinishReason) {
		t.Fatalf("error %v does not wrap ErrMissingFinishReason", err)
	}
	if pe := providerError(t, err); !pe.Emitted || pe.Retryable() {
		t.Errorf("Emitted = %t, Retryable() = %t; want true, false", pe.Emitted, pe.Retryable())
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: nothing is retried after a delta", n)
	}
}

var (
	rateLimited = `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`
	overloaded  = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
)

func TestRetry(t *testing.T) {
	textEvents := []runtime.ModelEvent{
		rt.Text("Hello"), rt.Text("! How can"), rt.Text(" I help you today?"),
		ssetest.Usage(runtime.Usage{InputTokens: 175, OutputTokens: 15, CacheReadInputTokens: 100, CacheCreationInputTokens: 50}),
		rt.Finish(runtime.FinishStop),
	}
	for _, tc := range []struct {
		name    string
		replies []ssetest.Reply
		check   func(t *testing.T, waits []time.Duration)
	}{{
		name: "429 with Retry-After",
		replies: []ssetest.Reply{
			ssetest.JSONError(http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, rateLimited),
			sse("text.sse"),
		},
		check: func(t *testing.T, waits []time.Duration) {
			if diff := cmp.Diff([]time.Duration{time.Second}, waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "529 overloaded, then 500 before the first byte",
		replies: []ssetest.Reply{
			ssetest.JSONError(529, nil, overloaded),
			{Status: http.StatusInternalServerError, Header: http.Header{"Content-Type": {"text/html"}}, Body: "<html>bad gateway</html>"},
			sse("text.sse"),
		},
		check: func(t *testing.T, waits []time.Duration) {
			if len(waits) != 2 || waits[0] < 75*time.Millisecond || waits[0] > 100*time.Millisecond ||
				waits[1] < 150*time.Millisecond || waits[1] > 200*time.Millisecond {
				t.Errorf("waits = %v, want about 100ms then 200ms", waits)
			}
		},
	}, {
		name:    "connection dropped before the first byte",
		replies: []ssetest.Reply{{Cut: true}, sse("text.sse")},
	}, {
		name:    "overloaded_error event before the first delta",
		replies: []ssetest.Reply{sse("overloaded_event.sse"), sse("text.sse")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m, srv, s := newModel(t, anthropic.Config{RetryBackoff: 100 * time.Millisecond}, tc.replies...)
			got, err := ssetest.Collect(t, t.Context(), m, hello)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(textEvents, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			reqs := srv.Requests()
			if len(reqs) != len(tc.replies) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tc.replies))
			}
			for _, r := range reqs[1:] {
				if string(r.Body) != string(reqs[0].Body) {
					t.Errorf("a retry sent a different body:\n%s\nwant\n%s", r.Body, reqs[0].Body)
				}
			}
			if tc.check != nil {
				tc.check(t, s.Waits())
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	fail := ssetest.JSONError(529, nil, overloaded)
	m, srv, s := newModel(t, anthropic.Config{}, fail, fail, fail)
	_, err := ssetest.Collect(t, t.Context(), m, hello)
	pe := providerError(t, err)
	if pe.Provider != "anthropic" || pe.Status != 529 || pe.Type != "overloaded_error" || pe.Attempts != 3 || !pe.Transient || !pe.Retryable() {
		t.Errorf("error %+v: want anthropic's status 529, overloaded_error, 3 attempts, transient, retryable later", pe)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (two retries by default)", n)
	}
	if n := len(s.Waits()); n != 2 {
		t.Errorf("%d waits, want 2", n)
	}
	if got, want := err.Error(), "anthropic: 529 Overloaded (overloaded_error): Overloaded (after 3 attempts)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestNoRetries: with MaxRetries negative nothing retries the call, here or in the
// runtime; the error still says a later call may succeed.
func TestNoRetries(t *testing.T) {
	m, srv, s := newModel(t, anthropic.Config{MaxRetries: -1}, ssetest.JSONError(http.StatusTooManyRequests, nil, rateLimited))
	_, err := ssetest.Collect(t, t.Context(), m, hello)
	if pe := providerError(t, err); !pe.Retryable() || pe.Attempts != 1 || len(s.Waits()) != 0 {
		t.Errorf("error %+v after %d waits: want retryable later, after 1 attempt and no wait", pe, len(s.Waits()))
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestNotRetried(t *testing.T) {
	m, srv, _ := newModel(t, anthropic.Config{}, ssetest.JSONError(http.StatusBadRequest, nil,
		`{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`))
	_, err := ssetest.Collect(t, t.Context(), m, hello)
	if pe := providerError(t, err); pe.Retryable() || pe.Transient || pe.Attempts != 1 || pe.Type != "invalid_request_error" {
		t.Errorf("error %+v: want 1 attempt, not transient, invalid_request_error", pe)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestConnectionDropped: a connection lost after the first delta ends the sequence with
// a typed error, and is not retried.
func TestConnectionDropped(t *testing.T) {
	m, srv, _ := newModel(t, anthropic.Config{}, ssetest.Reply{File: "testdata/cut_after_delta.sse", Cut: true})
	evs, err := ssetest.Collect(t, t.Context(), m, hello)
	if diff := cmp.Diff([]runtime.ModelEvent{rt.Text("The answer")}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	pe := providerError(t, err)
	if !pe.Emitted || !pe.Transient || pe.Retryable() || pe.Status != 0 {
		t.Errorf("error %+v: want emitted, transient, not retryable, no status", pe)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestKeyNotInErrors: the key goes in the Authorization header (as SDK v2 sends it)
// and nowhere else.
func TestKeyNotInErrors(t *testing.T) {
	m, srv, _ := newModel(t, anthropic.Config{}, ssetest.JSONError(http.StatusUnauthorized, nil,
		`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
	_, err := ssetest.Collect(t, t.Context(), m, hello)
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err)} {
		if strings.Contains(s, testKey) {
			t.Errorf("error text %q holds the API key", s)
		}
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
}

func TestNew(t *testing.T) {
	if _, err := anthropic.New(anthropic.Config{}); err == nil {
		t.Error("New without a model succeeded")
	}
	if _, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, MaxTokens: 1000, ThinkingBudget: 1000}); err == nil {
		t.Error("New with a thinking budget not below max tokens succeeded")
	}
}

// TestEnvironment: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL stand in for an empty Config.
func TestEnvironment(t *testing.T) {
	srv := ssetest.New(t, "/v1/messages", sse("text.sse"))
	t.Setenv("ANTHROPIC_API_KEY", testKey)
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	m, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ssetest.Collect(t, t.Context(), m, hello); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
}
