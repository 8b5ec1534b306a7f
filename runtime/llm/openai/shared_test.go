package openai_test

import (
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
	Provider: openai.Provider,
	Path:     "/chat/completions",
	New: func(t testing.TB, c providertest.Config) runtime.Model {
		m, err := openai.New(openai.Config{
			Model: "gpt-4.1-mini", BaseURL: c.BaseURL, APIKey: testKey, HTTPClient: c.HTTPClient,
			IdleTimeout: c.IdleTimeout, MaxRetries: c.MaxRetries, RetryBackoff: c.RetryBackoff,
		})
		if err != nil {
			t.Fatal(err)
		}
		openai.SetSleep(m, c.Sleep)
		return m
	},
	// The Chat Completions API sends nothing while a model thinks: the gaps are silence.
	Slow: providertest.Slow{
		File: "text.sse", Gap: 60 * time.Millisecond, Idle: 250 * time.Millisecond,
		Events: []runtime.ModelEvent{
			rt.Text("Hello"), rt.Text("! How can"), rt.Text(" I help you today?"),
			ssetest.Usage(runtime.Usage{InputTokens: 19, OutputTokens: 10, CacheReadInputTokens: 4}),
			rt.Finish(runtime.FinishStop),
		},
	},
}

func TestStalls(t *testing.T) { providertest.TestStalls(t, adapter) }

func TestCancel(t *testing.T) { providertest.TestCancel(t, adapter) }

func FuzzStream(f *testing.F) { providertest.FuzzStream(f, adapter) }
