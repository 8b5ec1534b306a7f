package anthropic_test

import (
	"errors"
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
	Provider: anthropic.Provider,
	Path:     "/v1/messages",
	New: func(t testing.TB, c providertest.Config) runtime.Model {
		m, err := anthropic.New(anthropic.Config{
			Model: "claude-sonnet-4-5", BaseURL: c.BaseURL, APIKey: testKey, HTTPClient: c.HTTPClient,
			IdleTimeout: c.IdleTimeout, MaxRetries: c.MaxRetries, RetryBackoff: c.RetryBackoff,
		})
		if err != nil {
			t.Fatal(err)
		}
		anthropic.SetSleep(m, c.Sleep)
		return m
	},
	// The API's pings, sent while the model is quiet, are bytes: for longer than the
	// idle timeout nothing but pings comes, and the stream does not stall.
	Slow: providertest.Slow{
		File: "quiet_with_pings.sse", Gap: 50 * time.Millisecond, Idle: 200 * time.Millisecond,
		Events: []runtime.ModelEvent{
			rt.Text("Hello"), rt.Text("! How can"), rt.Text(" I help you today?"),
			ssetest.Usage(runtime.Usage{InputTokens: 175, OutputTokens: 15, CacheReadInputTokens: 100, CacheCreationInputTokens: 50}),
			rt.Finish(runtime.FinishStop),
		},
	},
}

func TestStalls(t *testing.T) { providertest.TestStalls(t, adapter) }

func TestCancel(t *testing.T) { providertest.TestCancel(t, adapter) }

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
