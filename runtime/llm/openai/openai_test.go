package openai_test

import (
	"encoding/json"
	"testing"
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

// newModel returns a model with cfg's settings on a fake server that answers with
// replies.
func newModel(t *testing.T, cfg openai.Config, replies ...ssetest.Reply) (*openai.Model, *ssetest.Server) {
	t.Helper()
	srv := ssetest.New(t, adapter.Path, replies...)
	if cfg.Model == "" {
		cfg.Model = adapter.Model
	}
	cfg.BaseURL, cfg.APIKey, cfg.HTTPClient = srv.URL, providertest.Key, srv.Client()
	return providertest.Must[*openai.Model](t)(openai.New(cfg)), srv
}

func sse(name string) ssetest.Reply { return ssetest.Reply{File: "testdata/" + name} }

func TestStream(t *testing.T) {
	providertest.TestStream(t, adapter, []providertest.Recording{{
		File: "text.sse", Events: adapter.Text,
	}, {
		File: "reasoning.sse",
		Events: []runtime.ModelEvent{
			rt.Reasoning("The user asks"), rt.Reasoning(" for 6*7; that is 42."),
			rt.Text("6*7 is"), rt.Text(" 42."),
			ssetest.Usage(runtime.Usage{InputTokens: 12, OutputTokens: 30, ReasoningTokens: 21}),
			rt.Finish(runtime.FinishStop),
		},
	}, {
		File: "tool_call.sse",
		Events: []runtime.ModelEvent{
			rt.ToolDelta(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", ""),
			rt.ToolDelta(0, "", "", `{"`), rt.ToolDelta(0, "", "", "location"), rt.ToolDelta(0, "", "", `":"`),
			rt.ToolDelta(0, "", "", "Paris"), rt.ToolDelta(0, "", "", ", France"), rt.ToolDelta(0, "", "", `"}`),
			rt.Usage(81, 17), rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		File: "parallel_tool_calls.sse",
		Events: []runtime.ModelEvent{
			rt.ToolDelta(0, "call_paris", "get_weather", ""), rt.ToolDelta(1, "call_tokyo", "get_weather", ""),
			rt.ToolDelta(0, "", "", `{"location":`), rt.ToolDelta(1, "", "", `{"location":`),
			rt.ToolDelta(0, "", "", `"Paris"}`), rt.ToolDelta(1, "", "", `"Tokyo"}`),
			rt.Usage(90, 40), rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		// Ollama numbers every call 0 and says "stop"; the ids tell the calls apart.
		File: "ollama_index_zero.sse",
		Events: []runtime.ModelEvent{
			rt.ToolDelta(0, "call_a1b2c3", "get_weather", `{"location":"Paris"}`),
			rt.ToolDelta(0, "call_d4e5f6", "get_weather", `{"location":"Tokyo"}`),
			rt.Usage(120, 38), rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		File: "no_index.sse",
		Events: []runtime.ModelEvent{
			rt.ToolDelta(-1, "call_1", "get_weather", ""), rt.ToolDelta(-1, "", "", `{"location":`), rt.ToolDelta(-1, "", "", `"Paris"}`),
			rt.ToolDelta(-1, "call_2", "get_time", `{"zone":`), rt.ToolDelta(-1, "", "", `"Asia/Tokyo"}`),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		// Raw bytes pass through unchanged: the runtime joins split characters.
		File: "split_multibyte.sse",
		Events: []runtime.ModelEvent{
			rt.Text("Gr"), rt.Text("\xc3"), rt.Text("\xbcezi, "),
			rt.ToolDelta(0, "call_zurich", "get_weather", ""),
			rt.ToolDelta(0, "", "", `{"location":"Z`+"\xc3"), rt.ToolDelta(0, "", "", "\xbc"+`rich","near":"`+"\xe6"),
			rt.ToolDelta(0, "", "", "\x9d\xb1\xe4\xba"), rt.ToolDelta(0, "", "", "\xac"+`"}`),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		// Reasoning too, escaped or not; "reasoning_content":null adds nothing.
		File: "split_reasoning.sse",
		Events: []runtime.ModelEvent{
			rt.Reasoning("Gr\xc3"), rt.Reasoning("\xbcezi \"\xe6"), rt.Reasoning("\x9d\xb1\xe4\xba"),
			rt.Reasoning("\xac\" é/😀\n"),
			rt.Text("Grüezi!"), rt.Finish(runtime.FinishStop),
		},
	}})
}

func TestToolCallsAssemble(t *testing.T) {
	providertest.TestAssemble(t, adapter, []providertest.Assembly{
		{File: "tool_call.sse", Calls: []providertest.Call{{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Args: `{"location":"Paris, France"}`}}},
		{File: "parallel_tool_calls.sse", Calls: []providertest.Call{
			{ID: "call_paris", Name: "get_weather", Args: `{"location":"Paris"}`}, {ID: "call_tokyo", Name: "get_weather", Args: `{"location":"Tokyo"}`},
		}},
		{File: "ollama_index_zero.sse", Calls: []providertest.Call{
			{ID: "call_a1b2c3", Name: "get_weather", Args: `{"location":"Paris"}`}, {ID: "call_d4e5f6", Name: "get_weather", Args: `{"location":"Tokyo"}`},
		}},
		{File: "no_index.sse", Calls: []providertest.Call{
			{ID: "call_1", Name: "get_weather", Args: `{"location":"Paris"}`}, {ID: "call_2", Name: "get_time", Args: `{"zone":"Asia/Tokyo"}`},
		}},
		{File: "split_multibyte.sse", Text: "Grüezi, ", Calls: []providertest.Call{
			{ID: "call_zurich", Name: "get_weather", Args: `{"location":"Zürich","near":"東京"}`},
		}},
		{File: "split_reasoning.sse", Reasoning: "Grüezi \"東京\" é/😀\n", Text: "Grüezi!"},
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
	m, srv := newModel(t, openai.Config{MaxTokens: 512, Temperature: new(0.2)}, sse("answer.sse"))
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
	if got, want := got.Header.Get("Authorization"), "Bearer "+providertest.Key; got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
}

// TestRoundTrip streams a reply, lets the runtime assemble it, and checks that the
// assembled message converts back to what the server sent.
func TestRoundTrip(t *testing.T) {
	m, srv := newModel(t, openai.Config{Model: "deepseek-reasoner"}, sse("reasoning.sse"), sse("parallel_tool_calls.sse"), sse("answer.sse"))
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
	m, srv := newModel(t, openai.Config{OmitReasoning: true}, sse("text.sse"))
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

func TestNewWithoutKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	if _, err := openai.New(openai.Config{Model: "gpt-4.1-mini"}); err == nil {
		t.Error("New without a key or base URL succeeded")
	}
	// A local server needs no key.
	if _, err := openai.New(openai.Config{Model: "llama3.2", BaseURL: "http://localhost:11434/v1"}); err != nil {
		t.Errorf("New for a local server: %v", err)
	}
	t.Setenv("OPENAI_API_KEY", providertest.Key)
	if _, err := openai.New(openai.Config{Model: "gpt-4.1-mini"}); err != nil {
		t.Errorf("New with OPENAI_API_KEY: %v", err)
	}
}
