package openai_test

// The Responses API (Config.Responses), on recorded streams of its own in
// testdata/responses/testdata: each test runs in testdata/responses (inResponses), where
// the tests every adapter shares find their testdata as they expect it.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider/providertest"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	"github.com/agentd/agentd/runtime/llm/openai"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// inResponses makes testdata/responses the test's working directory.
func inResponses(t *testing.T) { t.Chdir("testdata/responses") }

// responsesAdapter describes the Responses API model to the tests every adapter shares.
var responsesAdapter = providertest.Adapter{
	Provider:  openai.ResponsesProvider,
	Path:      "/responses",
	Model:     "o4-mini",
	EnvAPIKey: "OPENAI_API_KEY", EnvBaseURL: "OPENAI_BASE_URL",
	New:        newTestModel(true),
	Text:       adapter.Text, // the same answer, recorded from either API
	Slow:       providertest.Slow{File: "text.sse", Gap: 150 * time.Millisecond, Idle: 600 * time.Millisecond},
	NoFinish:   "no_completed.sse",
	ErrorEvent: "error_event.sse",
	Opening:    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"model\":\"o4-mini\",\"output\":[]}}\n\n",

	RateLimited: providertest.APIError{
		Status: http.StatusTooManyRequests, Body: `{"error":{"message":"Rate limit reached for o4-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		Type: "requests", Text: "429 Too Many Requests (requests): Rate limit reached for o4-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.",
	},
	ServerError: adapter.ServerError, // the same body on either API
	BadRequest: providertest.APIError{
		Status: http.StatusBadRequest, Body: `{"error":{"message":"Invalid 'input[1].content'","type":"invalid_request_error","param":"input","code":null}}`,
		Type: "invalid_request_error", Text: "400 Bad Request (invalid_request_error): Invalid 'input[1].content'",
	},
	Unauthorized: adapter.Unauthorized,
}

func TestResponsesShared(t *testing.T) {
	inResponses(t)
	providertest.TestShared(t, responsesAdapter)
}

// reasoningItem is the reasoning state the adapter records for one reasoning item.
func reasoningItem(id, encrypted string, summary ...string) []byte {
	b, _ := json.Marshal(struct {
		Type             string   `json:"type"`
		ID               string   `json:"id"`
		EncryptedContent string   `json:"encrypted_content"`
		Summary          []string `json:"summary"`
	}{"openai.reasoning", id, encrypted, summary})
	return append(b, '\n')
}

func TestResponsesStream(t *testing.T) {
	inResponses(t)
	providertest.TestStream(t, responsesAdapter, []providertest.Recording{{
		File: "text.sse", Events: responsesAdapter.Text,
	}, {
		// A reasoning model's summary streams as reasoning, its parts as paragraphs; the
		// item, encrypted, is the block's state; then a function call, its arguments in
		// fragments; usage with cached and reasoning tokens.
		File: "reasoning_tool_call.sse",
		Events: []runtime.ModelEvent{
			rt.Reasoning("**Checking"), rt.Reasoning(" the weather**"), rt.Reasoning("\n\nI need Paris's weather."),
			rt.ReasoningState(reasoningItem("rs_1", "gAAAAABoEncryptedOne==", "**Checking the weather**", "I need Paris's weather.")),
			rt.ToolDelta(1, "call_paris", "get_weather", ""), rt.ToolDelta(1, "", "", `{"location":`), rt.ToolDelta(1, "", "", `"Paris"}`),
			ssetest.Usage(runtime.Usage{InputTokens: 320, OutputTokens: 140, ReasoningTokens: 128, CacheReadInputTokens: 256}),
			rt.Finish(runtime.FinishToolCalls),
		},
	}, {
		File: "incomplete.sse",
		Events: []runtime.ModelEvent{
			rt.Text("A very long"), ssetest.Usage(runtime.Usage{InputTokens: 20, OutputTokens: 3}), rt.Finish(runtime.FinishLength),
		},
	}})
}

func TestResponsesServedModel(t *testing.T) {
	inResponses(t)
	providertest.TestServedModel(t, responsesAdapter, []providertest.Served{
		{File: "text.sse", Model: "o4-mini-2025-04-16"},
		{File: "reasoning_answer.sse", Model: "o4-mini-2025-04-16"},
	})
}

// A response that failed in the stream is the call's error, with the server's code and
// message, retried when its code says it is transient.
func TestResponsesFailed(t *testing.T) {
	inResponses(t)
	m, srv := newResponsesModel(t, openai.Config{MaxRetries: -1}, sse("failed.sse"))
	_, err := ssetest.Collect(t, t.Context(), m, providertest.Hello)
	var pe *openai.ProviderError
	if !errors.As(err, &pe) || pe.Type != "rate_limit_exceeded" || !strings.Contains(pe.Message, "Rate limit reached") || !pe.Transient {
		t.Fatalf("error %v (%+v), want the response's rate_limit_exceeded, transient", err, pe)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (retries off)", n)
	}
}

// newResponsesModel returns a Responses API model with cfg's settings on a fake server that
// answers with replies.
func newResponsesModel(t *testing.T, cfg openai.Config, replies ...ssetest.Reply) (*openai.Model, *ssetest.Server) {
	t.Helper()
	srv := ssetest.New(t, responsesAdapter.Path, replies...)
	cfg.Model, cfg.Responses = responsesAdapter.Model, true
	cfg.BaseURL, cfg.APIKey, cfg.HTTPClient = srv.URL, providertest.Key, srv.Client()
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, srv
}

// The reasoning a call streamed goes back, as the same item with its encrypted content,
// in the next step's request, after the user's message and before the function call it
// led to; the call's result follows as a function_call_output. The request is stateless
// (store false) and asks for the encrypted reasoning and its summary.
func TestResponsesReasoningRoundTrip(t *testing.T) {
	inResponses(t)
	m, srv := newResponsesModel(t, openai.Config{ReasoningEffort: "low"}, sse("reasoning_tool_call.sse"), sse("reasoning_answer.sse"))
	first, _ := providertest.Assemble(t, m, "get_weather")
	result := runtime.Message{Role: runtime.RoleTool, Parts: []runtime.Part{{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{
		CallID: "call_paris", Name: "get_weather", Output: runtime.Output{JSON: json.RawMessage(`{"celsius":15}`)},
	}}}}
	req := &runtime.ModelRequest{
		Messages: []runtime.Message{runtime.SystemMessage("You are terse."), runtime.UserMessage("Weather in Paris?"), first, result},
		Tools:    []runtime.ToolSpec{{Name: "get_weather", Description: "Weather of a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)}},
	}
	evs, err := ssetest.Collect(t, t.Context(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	if text := textOf(evs); text != "It is 15°C in Paris." {
		t.Errorf("answer %q", text)
	}
	got := srv.Requests()[1].JSON
	want := map[string]any{
		"model":        "o4-mini",
		"stream":       true,
		"store":        false,
		"include":      []any{"reasoning.encrypted_content"},
		"reasoning":    map[string]any{"effort": "low", "summary": "auto"},
		"instructions": "You are terse.",
		"tools": []any{map[string]any{
			"type": "function", "name": "get_weather", "description": "Weather of a city.", "strict": false,
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}, "required": []any{"location"}},
		}},
		"input": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Weather in Paris?"}}},
			map[string]any{"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAABoEncryptedOne==", "summary": []any{
				map[string]any{"type": "summary_text", "text": "**Checking the weather**"},
				map[string]any{"type": "summary_text", "text": "I need Paris's weather."},
			}},
			map[string]any{"type": "function_call", "call_id": "call_paris", "name": "get_weather", "arguments": `{"location":"Paris"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_paris", "output": `{"celsius":15}`},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second request (-want +got):\n%s", diff)
	}
}

// Reasoning another provider made (no state, or a state that is not a reasoning item's)
// is left out of the input: the API takes back only the items it made.
func TestResponsesForeignReasoningLeftOut(t *testing.T) {
	inResponses(t)
	m, srv := newResponsesModel(t, openai.Config{}, sse("text.sse"))
	req := &runtime.ModelRequest{Messages: []runtime.Message{
		runtime.UserMessage("Hi"),
		{Role: runtime.RoleAssistant, Parts: []runtime.Part{
			{Kind: runtime.PartReasoning, Text: "thinking", State: []byte(`{"type":"thinking","signature":"sig"}` + "\n")},
			{Kind: runtime.PartReasoning, Text: "more"},
			runtime.TextPart("Hello."),
		}},
		runtime.UserMessage("Again"),
	}}
	if _, err := ssetest.Collect(t, t.Context(), m, req); err != nil {
		t.Fatal(err)
	}
	input := srv.Requests()[0].JSON["input"].([]any)
	want := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Hi"}}},
		map[string]any{"role": "assistant", "content": "Hello."},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Again"}}},
	}
	if diff := cmp.Diff(want, input); diff != "" {
		t.Errorf("input (-want +got):\n%s", diff)
	}
}

// textOf joins the text deltas of evs.
func textOf(evs []runtime.ModelEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == runtime.ModelTextDelta {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func FuzzResponsesStream(f *testing.F) {
	f.Chdir("testdata/responses")
	providertest.FuzzStream(f, responsesAdapter)
}
