package openai_test

import (
	"context"
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
	"github.com/agentd/agentd/runtime/llm/internal/provider/providertest"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	"github.com/agentd/agentd/runtime/llm/openai"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sk-test-0123456789abcdef"

// newModel returns a model on a fake server that answers with replies.
func newModel(t *testing.T, cfg openai.Config, replies ...ssetest.Reply) (*openai.Model, *ssetest.Server, *ssetest.Sleeps) {
	t.Helper()
	srv := ssetest.New(t, "/chat/completions", replies...)
	if cfg.Model == "" {
		cfg.Model = "gpt-4.1-mini"
	}
	cfg.BaseURL, cfg.APIKey, cfg.HTTPClient = srv.URL, testKey, srv.Client()
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := new(ssetest.Sleeps)
	openai.SetSleep(m, s.Sleep)
	return m, srv, s
}

func sse(name string) ssetest.Reply { return ssetest.Reply{File: "testdata/" + name} }

var hello = &runtime.ModelRequest{Messages: []runtime.Message{runtime.SystemMessage("Be brief."), runtime.UserMessage("Hello")}}

func TestName(t *testing.T) {
	m, _, _ := newModel(t, openai.Config{Model: "llama3.2"})
	if got, want := m.Name(), "openai:llama3.2"; got != want {
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
			ssetest.Usage(runtime.Usage{InputTokens: 19, OutputTokens: 10, CacheReadInputTokens: 4}),
			rt.Finish(runtime.FinishStop),
		},
	}, {
		file: "reasoning.sse",
		want: []runtime.ModelEvent{
			rt.Reasoning("The user asks"), rt.Reasoning(" for 6*7; that is 42."),
			rt.Text("6*7 is"), rt.Text(" 42."),
			ssetest.Usage(runtime.Usage{InputTokens: 12, OutputTokens: 30, ReasoningTokens: 21}),
			rt.Finish(runtime.FinishStop),
		},
	}, {
		file: "tool_call.sse",
		want: []runtime.ModelEvent{
			rt.ToolDelta(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", ""),
			rt.ToolDelta(0, "", "", `{"`), rt.ToolDelta(0, "", "", "location"), rt.ToolDelta(0, "", "", `":"`),
			rt.ToolDelta(0, "", "", "Paris"), rt.ToolDelta(0, "", "", ", France"), rt.ToolDelta(0, "", "", `"}`),
			rt.Usage(81, 17), rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		file: "parallel_tool_calls.sse",
		want: []runtime.ModelEvent{
			rt.ToolDelta(0, "call_paris", "get_weather", ""), rt.ToolDelta(1, "call_tokyo", "get_weather", ""),
			rt.ToolDelta(0, "", "", `{"location":`), rt.ToolDelta(1, "", "", `{"location":`),
			rt.ToolDelta(0, "", "", `"Paris"}`), rt.ToolDelta(1, "", "", `"Tokyo"}`),
			rt.Usage(90, 40), rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		// Ollama numbers every call 0 and says "stop"; the ids tell the calls apart.
		file: "ollama_index_zero.sse",
		want: []runtime.ModelEvent{
			rt.ToolDelta(0, "call_a1b2c3", "get_weather", `{"location":"Paris"}`),
			rt.ToolDelta(0, "call_d4e5f6", "get_weather", `{"location":"Tokyo"}`),
			rt.Usage(120, 38), rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		file: "no_index.sse",
		want: []runtime.ModelEvent{
			rt.ToolDelta(-1, "call_1", "get_weather", ""), rt.ToolDelta(-1, "", "", `{"location":`), rt.ToolDelta(-1, "", "", `"Paris"}`),
			rt.ToolDelta(-1, "call_2", "get_time", `{"zone":`), rt.ToolDelta(-1, "", "", `"Asia/Tokyo"}`),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		// Raw bytes pass through unchanged: the runtime joins split characters.
		file: "split_multibyte.sse",
		want: []runtime.ModelEvent{
			rt.Text("Gr"), rt.Text("\xc3"), rt.Text("\xbcezi, "),
			rt.ToolDelta(0, "call_zurich", "get_weather", ""),
			rt.ToolDelta(0, "", "", `{"location":"Z`+"\xc3"), rt.ToolDelta(0, "", "", "\xbc"+`rich","near":"`+"\xe6"),
			rt.ToolDelta(0, "", "", "\x9d\xb1\xe4\xba"), rt.ToolDelta(0, "", "", "\xac"+`"}`),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		// Reasoning too, escaped or not; "reasoning_content":null adds nothing.
		file: "split_reasoning.sse",
		want: []runtime.ModelEvent{
			rt.Reasoning("Gr\xc3"), rt.Reasoning("\xbcezi \"\xe6"), rt.Reasoning("\x9d\xb1\xe4\xba"),
			rt.Reasoning("\xac\" é/😀\n"),
			rt.Text("Grüezi!"), rt.Finish(runtime.FinishStop),
		},
	}} {
		t.Run(strings.TrimSuffix(tc.file, ".sse"), func(t *testing.T) {
			m, srv, _ := newModel(t, openai.Config{}, sse(tc.file))
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

// TestToolCallsAssemble checks that the runtime joins the adapter's fragments into the
// calls the server meant, whatever its way of numbering them.
func TestToolCallsAssemble(t *testing.T) {
	type call struct{ ID, Name, Args string }
	for _, tc := range []struct {
		file string
		want []call
	}{
		{"tool_call.sse", []call{{"call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", `{"location":"Paris, France"}`}}},
		{"parallel_tool_calls.sse", []call{{"call_paris", "get_weather", `{"location":"Paris"}`}, {"call_tokyo", "get_weather", `{"location":"Tokyo"}`}}},
		{"ollama_index_zero.sse", []call{{"call_a1b2c3", "get_weather", `{"location":"Paris"}`}, {"call_d4e5f6", "get_weather", `{"location":"Tokyo"}`}}},
		{"no_index.sse", []call{{"call_1", "get_weather", `{"location":"Paris"}`}, {"call_2", "get_time", `{"zone":"Asia/Tokyo"}`}}},
		{"split_multibyte.sse", []call{{"call_zurich", "get_weather", `{"location":"Zürich","near":"東京"}`}}},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".sse"), func(t *testing.T) {
			m, _, _ := newModel(t, openai.Config{}, sse(tc.file))
			msg, evs := providertest.Assemble(t, m, "get_weather", "get_time")
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
	t.Run("split text", func(t *testing.T) {
		m, _, _ := newModel(t, openai.Config{}, sse("split_multibyte.sse"))
		msg, _ := providertest.Assemble(t, m, "get_weather")
		if got, want := msg.Text(), "Grüezi, "; got != want {
			t.Errorf("text = %q, want %q", got, want)
		}
	})
	t.Run("split reasoning", func(t *testing.T) {
		m, _, _ := newModel(t, openai.Config{}, sse("split_reasoning.sse"))
		msg, evs := providertest.Assemble(t, m)
		var got strings.Builder
		for _, p := range msg.Parts {
			if p.Kind == runtime.PartReasoning {
				got.WriteString(p.Text)
			}
		}
		if want := "Grüezi \"東京\" é/😀\n"; got.String() != want {
			t.Errorf("reasoning = %q, want %q", got.String(), want)
		}
		for _, ev := range evs {
			if ev, ok := ev.(*runtime.ReasoningDelta); ok && !utf8.ValidString(ev.Delta) {
				t.Errorf("event %s carries a broken character", rt.RenderEvent(ev))
			}
		}
	})
}

func TestUnquote(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{`""`, "", true},
		{`"plain"`, "plain", true},
		{`"a\"b\\c\/d"`, `a"b\c/d`, true},
		{`"\b\f\n\r\t"`, "\b\f\n\r\t", true},
		{`"\u00e9\u00C9\u6771"`, "éÉ東", true},
		{`"\ud83d\ude00!"`, "😀!", true},          // a surrogate pair
		{`"\ud83dx"`, "\ufffdx", true},           // a lone high half
		{`"\ude00\ud83d"`, "\ufffd\ufffd", true}, // halves in the wrong order
		{`"\ud83d\u0041"`, "\ufffdA", true},      // a high half before another escape
		{"\"Gr\xc3\"", "Gr\xc3", true},           // raw bytes are kept, not replaced
		{"\"\xbc\\n\xff\"", "\xbc\n\xff", true},  // also around escapes
		{`null`, "", false},
		{`42`, "", false},
		{`"`, "", false},
		{`"\x"`, "", false},
		{`"\u12"`, "", false},
		{`"\u12g4"`, "", false},
		{`"a\"`, "", false},
	} {
		got, ok := openai.Unquote(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("unquote(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		// Where encoding/json changes no bytes, the two agree.
		var s string
		if tc.ok && utf8.ValidString(tc.in) && (json.Unmarshal([]byte(tc.in), &s) != nil || s != got) {
			t.Errorf("unquote(%q) = %q; encoding/json says %q", tc.in, got, s)
		}
	}
	if n := testing.AllocsPerRun(100, func() { openai.Unquote(`"no escapes here"`) }); n != 0 {
		t.Errorf("unquote without escapes allocates %v times, want 0", n)
	}
}

// TestRequest checks the request the server gets for a transcript holding every kind of
// part: messages, tools and tool results in Chat Completions' shape.
func TestRequest(t *testing.T) {
	m, srv, _ := newModel(t, openai.Config{MaxTokens: 512, Temperature: new(0.2)}, sse("answer.sse"))
	req := &runtime.ModelRequest{
		Messages: []runtime.Message{
			runtime.SystemMessage("You are terse."),
			{Role: runtime.RoleUser, Parts: []runtime.Part{
				runtime.TextPart("What is in this picture, and what is 6*7?"),
				{Kind: runtime.PartMedia, Media: runtime.Media{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}},
			}},
			{Role: runtime.RoleAssistant, Parts: []runtime.Part{
				{Kind: runtime.PartReasoning, Text: "I should calculate."},
				runtime.TextPart("Let me check."),
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_1", Name: "calculate", Arguments: `{"expression": "6*7"}`}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_2", Name: "describe", Arguments: `{}`}},
			}},
			{Role: runtime.RoleTool, Parts: []runtime.Part{
				{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{CallID: "call_1", Name: "calculate", Output: runtime.Output{JSON: json.RawMessage(`{"result":42}`)}}},
				{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{CallID: "call_2", Name: "describe", Output: runtime.ErrorOutput("no image tool")}},
			}},
			// A partial message holding reasoning alone is left out.
			{Role: runtime.RoleAssistant, Partial: true, Parts: []runtime.Part{{Kind: runtime.PartReasoning, Text: "Hmm"}}},
			runtime.UserMessage("Go on."),
		},
		Tools: []runtime.ToolSpec{
			{Name: "calculate", Description: "Evaluates arithmetic.", Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`)},
			{Name: "describe"},
		},
		Settings: runtime.CallSettings{TopP: new(0.9), Extra: map[string]json.RawMessage{"seed": json.RawMessage(`7`)}},
	}
	if _, err := ssetest.Collect(t, t.Context(), m, req); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	want := map[string]any{
		"model":                 "gpt-4.1-mini",
		"stream":                true,
		"stream_options":        map[string]any{"include_usage": true},
		"max_completion_tokens": 512.0,
		"temperature":           0.2,
		"top_p":                 0.9,
		"seed":                  7.0,
		"messages": []any{
			map[string]any{"role": "system", "content": "You are terse."},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "What is in this picture, and what is 6*7?"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw=="}},
			}},
			map[string]any{
				"role":              "assistant",
				"content":           "Let me check.",
				"reasoning_content": "I should calculate.",
				"tool_calls": []any{
					map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "calculate", "arguments": `{"expression": "6*7"}`}},
					map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "describe", "arguments": `{}`}},
				},
			},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": `{"result":42}`},
			map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "Error: no image tool"},
			map[string]any{"role": "user", "content": "Go on."},
		},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{
				"name": "calculate", "description": "Evaluates arithmetic.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}, "required": []any{"expression"}},
			}},
			map[string]any{"type": "function", "function": map[string]any{
				"name": "describe", "parameters": map[string]any{"type": "object", "properties": map[string]any{}},
			}},
		},
	}
	if diff := cmp.Diff(want, got.JSON); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if got, want := got.Header.Get("Authorization"), "Bearer "+testKey; got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
}

// TestRoundTrip streams a reply, lets the runtime assemble it, and checks that the
// assembled message converts back to what the server sent.
func TestRoundTrip(t *testing.T) {
	m, srv, _ := newModel(t, openai.Config{Model: "deepseek-reasoner"}, sse("reasoning.sse"), sse("parallel_tool_calls.sse"), sse("answer.sse"))
	first, _ := providertest.Assemble(t, m)
	second, _ := providertest.Assemble(t, m, "get_weather")
	req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("Weather?"), first, second}}
	if _, err := ssetest.Collect(t, t.Context(), m, req); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[2].JSON["messages"]
	want := []any{
		map[string]any{"role": "user", "content": "Weather?"},
		map[string]any{"role": "assistant", "content": "6*7 is 42.", "reasoning_content": "The user asks for 6*7; that is 42."},
		map[string]any{"role": "assistant", "tool_calls": []any{
			map[string]any{"id": "call_paris", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"location":"Paris"}`}},
			map[string]any{"id": "call_tokyo", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"location":"Tokyo"}`}},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestOmitReasoning(t *testing.T) {
	m, srv, _ := newModel(t, openai.Config{OmitReasoning: true}, sse("text.sse"))
	req := &runtime.ModelRequest{Messages: []runtime.Message{
		{Role: runtime.RoleAssistant, Parts: []runtime.Part{{Kind: runtime.PartReasoning, Text: "secret"}, runtime.TextPart("Hi")}},
	}}
	if _, err := ssetest.Collect(t, t.Context(), m, req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{map[string]any{"role": "assistant", "content": "Hi"}}, srv.Requests()[0].JSON["messages"]); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// providerError returns err as a *ProviderError, failing t if it is not one.
func providerError(t *testing.T, err error) *openai.ProviderError {
	t.Helper()
	pe, ok := errors.AsType[*openai.ProviderError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *ProviderError", err, err)
	}
	return pe
}

func TestNoFinishReason(t *testing.T) {
	m, srv, _ := newModel(t, openai.Config{}, sse("no_finish_reason.sse"))
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

var rateLimited = `{"error":{"message":"Rate limit reached for gpt-4.1-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`

func TestRetry(t *testing.T) {
	textEvents := []runtime.ModelEvent{
		rt.Text("Hello"), rt.Text("! How can"), rt.Text(" I help you today?"),
		ssetest.Usage(runtime.Usage{InputTokens: 19, OutputTokens: 10, CacheReadInputTokens: 4}),
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
		name: "429 with retry-after-ms",
		replies: []ssetest.Reply{
			ssetest.JSONError(http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}, rateLimited),
			sse("text.sse"),
		},
		check: func(t *testing.T, waits []time.Duration) {
			if diff := cmp.Diff([]time.Duration{250 * time.Millisecond}, waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "500 before the first byte, then 503",
		replies: []ssetest.Reply{
			{Status: http.StatusInternalServerError, Header: http.Header{"Content-Type": {"text/plain"}}, Body: "upstream connect error"},
			ssetest.JSONError(http.StatusServiceUnavailable, nil, `{"error":{"message":"overloaded","type":"server_error"}}`),
			sse("text.sse"),
		},
		check: func(t *testing.T, waits []time.Duration) {
			// Exponential backoff from 100ms, less up to a quarter of jitter.
			if len(waits) != 2 || waits[0] < 75*time.Millisecond || waits[0] > 100*time.Millisecond ||
				waits[1] < 150*time.Millisecond || waits[1] > 200*time.Millisecond {
				t.Errorf("waits = %v, want about 100ms then 200ms", waits)
			}
		},
	}, {
		name:    "connection dropped before the first byte",
		replies: []ssetest.Reply{{Cut: true}, sse("text.sse")},
	}, {
		name:    "error event before the first delta",
		replies: []ssetest.Reply{sse("error_event.sse"), sse("text.sse")},
	}, {
		name: "stream cut before the first delta",
		replies: []ssetest.Reply{
			{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n", Cut: true},
			sse("text.sse"),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m, srv, s := newModel(t, openai.Config{RetryBackoff: 100 * time.Millisecond}, tc.replies...)
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
	fail := ssetest.JSONError(http.StatusInternalServerError, nil, `{"error":{"message":"The server had an error","type":"server_error"}}`)
	m, srv, s := newModel(t, openai.Config{}, fail, fail, fail)
	_, err := ssetest.Collect(t, t.Context(), m, hello)
	pe := providerError(t, err)
	if pe.Provider != "openai" || pe.Status != 500 || pe.Attempts != 3 || !pe.Transient || !pe.Retryable() {
		t.Errorf("error %+v: want openai's status 500, 3 attempts, transient, retryable later", pe)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (two retries by default)", n)
	}
	if n := len(s.Waits()); n != 2 {
		t.Errorf("%d waits, want 2", n)
	}
	if got, want := err.Error(), "openai: 500 Internal Server Error (server_error): The server had an error (after 3 attempts)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestNoRetries: with MaxRetries negative nothing retries the call, here or in the
// runtime; the error still says a later call may succeed.
func TestNoRetries(t *testing.T) {
	fail := ssetest.JSONError(http.StatusTooManyRequests, nil, rateLimited)
	m, srv, s := newModel(t, openai.Config{MaxRetries: -1}, fail)
	_, err := ssetest.Collect(t, t.Context(), m, hello)
	if pe := providerError(t, err); !pe.Retryable() || pe.Attempts != 1 || len(s.Waits()) != 0 {
		t.Errorf("error %+v after %d waits: want retryable later, after 1 attempt and no wait", pe, len(s.Waits()))
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reply     ssetest.Reply
		retryable bool
	}{
		{"400", ssetest.JSONError(http.StatusBadRequest, nil, `{"error":{"message":"Invalid 'messages[1].content'","type":"invalid_request_error","param":"messages","code":null}}`), false},
		// Transient, but the server asks for more than the longest wait: a later call
		// may succeed, not one now.
		{"Retry-After too long", ssetest.JSONError(http.StatusTooManyRequests, http.Header{"Retry-After": {"3600"}}, rateLimited), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, srv, _ := newModel(t, openai.Config{}, tc.reply)
			_, err := ssetest.Collect(t, t.Context(), m, hello)
			if pe := providerError(t, err); pe.Retryable() != tc.retryable || pe.Attempts != 1 {
				t.Errorf("error %+v: want 1 attempt, Retryable() %t", pe, tc.retryable)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// TestConnectionDropped: a connection lost after the first delta ends the sequence with
// a typed error, and is not retried.
func TestConnectionDropped(t *testing.T) {
	m, srv, _ := newModel(t, openai.Config{}, ssetest.Reply{File: "testdata/cut_after_delta.sse", Cut: true})
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

func TestCancelDuringBackoff(t *testing.T) {
	srv := ssetest.New(t, "/chat/completions", ssetest.JSONError(http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}}, rateLimited))
	m, err := openai.New(openai.Config{Model: "gpt-4.1-mini", BaseURL: srv.URL, APIKey: testKey, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = ssetest.Collect(t, ctx, m, hello)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the backoff outlived the context by %v", d)
	}
}

// TestKeyNotInErrors: the key goes in the Authorization header and nowhere else.
func TestKeyNotInErrors(t *testing.T) {
	m, srv, _ := newModel(t, openai.Config{}, ssetest.JSONError(http.StatusUnauthorized, nil,
		`{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`))
	_, err := ssetest.Collect(t, t.Context(), m, hello)
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", providerError(t, err).Err)} {
		if strings.Contains(s, testKey) {
			t.Errorf("error text %q holds the API key", s)
		}
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
}

func TestNew(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	if _, err := openai.New(openai.Config{}); err == nil {
		t.Error("New without a model succeeded")
	}
	if _, err := openai.New(openai.Config{Model: "gpt-4.1-mini"}); err == nil {
		t.Error("New without a key or base URL succeeded")
	}
	// A local server needs no key.
	if _, err := openai.New(openai.Config{Model: "llama3.2", BaseURL: "http://localhost:11434/v1"}); err != nil {
		t.Errorf("New for a local server: %v", err)
	}
	t.Setenv("OPENAI_API_KEY", testKey)
	if _, err := openai.New(openai.Config{Model: "gpt-4.1-mini"}); err != nil {
		t.Errorf("New with OPENAI_API_KEY: %v", err)
	}
}

// TestEnvironment: OPENAI_API_KEY and OPENAI_BASE_URL stand in for an empty Config.
func TestEnvironment(t *testing.T) {
	srv := ssetest.New(t, "/v1/chat/completions", sse("text.sse"))
	t.Setenv("OPENAI_API_KEY", testKey)
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	m, err := openai.New(openai.Config{Model: "llama3.2", HTTPClient: srv.Client()})
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
