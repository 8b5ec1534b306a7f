package anthropic_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/internal/provider/providertest"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	"github.com/agentd/agentd/runtime/llm/openai"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// adapter describes this package to the tests every adapter shares.
var adapter = providertest.Adapter{
	Provider:  anthropic.Provider,
	Path:      "/v1/messages",
	Model:     "claude-sonnet-4-5",
	EnvAPIKey: "ANTHROPIC_API_KEY", EnvBaseURL: "ANTHROPIC_BASE_URL",
	New: func(c providertest.Config) (runtime.Model, error) {
		m, err := anthropic.New(anthropic.Config{
			Model: c.Model, APIKey: c.APIKey, BaseURL: c.BaseURL, HTTPClient: c.HTTPClient,
			IdleTimeout: c.IdleTimeout, MaxRetries: c.MaxRetries, RetryBackoff: c.RetryBackoff,
		})
		if err != nil {
			return nil, err
		}
		anthropic.SetSleep(m, c.Sleep)
		return m, nil
	},
	Text: []runtime.ModelEvent{
		rt.Text("Hello"), rt.Text("! How can"), rt.Text(" I help you today?"),
		// input_tokens 25 plus 100 read from the cache and 50 written to it.
		ssetest.Usage(runtime.Usage{InputTokens: 175, OutputTokens: 15, CacheReadInputTokens: 100, CacheCreationInputTokens: 50}),
		rt.Finish(runtime.FinishStop),
	},
	// The API's pings, sent while the model is quiet, are bytes: for longer than the
	// idle timeout nothing but pings comes, and the stream does not stall.
	Slow:       providertest.Slow{File: "quiet_with_pings.sse", Gap: 100 * time.Millisecond, Idle: 500 * time.Millisecond},
	NoFinish:   "no_stop_reason.sse",
	ErrorEvent: "overloaded_event.sse",
	Opening: "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}` + "\n\n",

	RateLimited: providertest.APIError{
		Status: http.StatusTooManyRequests, Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
		Type: "rate_limit_error", Text: "429 Too Many Requests (rate_limit_error): Number of request tokens has exceeded your per-minute rate limit",
	},
	ServerError: providertest.APIError{
		Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		Type: "overloaded_error", Text: "529 Overloaded (overloaded_error): Overloaded",
	},
	BadRequest: providertest.APIError{
		Status: http.StatusBadRequest, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`,
		Type: "invalid_request_error", Text: "400 Bad Request (invalid_request_error): messages: roles must alternate",
	},
	Unauthorized: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
}

func TestShared(t *testing.T) { providertest.TestShared(t, adapter) }

func FuzzStream(f *testing.F) { providertest.FuzzStream(f, adapter) }

// TestErrorsAreTheAdaptersShared: a caller checks once for both adapters.
func TestErrorsAreTheAdaptersShared(t *testing.T) {
	if !errors.Is(anthropic.ErrStalled, openai.ErrStalled) {
		t.Error("anthropic.ErrStalled is not openai.ErrStalled")
	}
	var err error = &anthropic.ProviderError{Provider: anthropic.Provider, Status: 529}
	if pe, ok := errors.AsType[*openai.ProviderError](err); !ok || pe.Provider != "anthropic" {
		t.Errorf("errors.AsType[*openai.ProviderError] = %v, %t on an anthropic error; want it, naming its provider", pe, ok)
	}
}
