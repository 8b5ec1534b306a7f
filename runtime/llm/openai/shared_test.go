package openai_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider/providertest"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	"github.com/agentd/agentd/runtime/llm/openai"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// adapter describes this package to the tests every adapter shares.
var adapter = providertest.Adapter{
	Provider:  openai.Provider,
	Path:      "/chat/completions",
	Model:     "gpt-4.1-mini",
	EnvAPIKey: "OPENAI_API_KEY", EnvBaseURL: "OPENAI_BASE_URL",
	New: newTestModel(false),
	Text: []runtime.ModelEvent{
		rt.Text("Hello"), rt.Text("! How can"), rt.Text(" I help you today?"),
		ssetest.Usage(runtime.Usage{InputTokens: 19, OutputTokens: 10, CacheReadInputTokens: 4}),
		rt.Finish(runtime.FinishStop),
	},
	// The Chat Completions API sends nothing while a model thinks: the gaps are silence.
	Slow:       providertest.Slow{File: "text.sse", Gap: 150 * time.Millisecond, Idle: 600 * time.Millisecond},
	NoFinish:   "no_finish_reason.sse",
	ErrorEvent: "error_event.sse",
	Opening:    `data: {"id":"x","choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\n\n",

	RateLimited: providertest.APIError{
		Status: http.StatusTooManyRequests, Body: `{"error":{"message":"Rate limit reached for gpt-4.1-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		Type: "requests", Text: "429 Too Many Requests (requests): Rate limit reached for gpt-4.1-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.",
	},
	ServerError: providertest.APIError{
		Status: http.StatusInternalServerError, Body: `{"error":{"message":"The server had an error","type":"server_error"}}`,
		Type: "server_error", Text: "500 Internal Server Error (server_error): The server had an error",
	},
	BadRequest: providertest.APIError{
		Status: http.StatusBadRequest, Body: `{"error":{"message":"Invalid 'messages[1].content'","type":"invalid_request_error","param":"messages","code":null}}`,
		Type: "invalid_request_error", Text: "400 Bad Request (invalid_request_error): Invalid 'messages[1].content'",
	},
	Unauthorized: `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
}

// newTestModel returns the shared tests' New, for Chat Completions or, with responses,
// the Responses API.
func newTestModel(responses bool) func(c providertest.Config) (runtime.Model, error) {
	return func(c providertest.Config) (runtime.Model, error) {
		m, err := openai.New(openai.Config{
			Model: c.Model, APIKey: c.APIKey, BaseURL: c.BaseURL, HTTPClient: c.HTTPClient, Responses: responses,
			IdleTimeout: c.IdleTimeout, MaxRetries: c.MaxRetries, RetryBackoff: c.RetryBackoff,
		})
		if err != nil {
			return nil, err
		}
		openai.SetSleep(m, c.Sleep)
		return m, nil
	}
}

func TestShared(t *testing.T) { providertest.TestShared(t, adapter) }

func FuzzStream(f *testing.F) { providertest.FuzzStream(f, adapter) }
