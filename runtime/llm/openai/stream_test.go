package openai_test

import (
	"testing"

	"github.com/agentd/agentd/runtime/llm/internal/provider/providertest"
)

// TestServedModel: every chunk names the model that served the call, often a dated
// version of the one asked for (gpt-4.1-mini here); the adapter reports it once.
func TestServedModel(t *testing.T) {
	providertest.TestServedModel(t, adapter, []providertest.Served{
		{File: "text.sse", Model: "gpt-4.1-mini-2025-04-14"},
		{File: "reasoning.sse", Model: "deepseek-reasoner"},
		{File: "ollama_index_zero.sse", Model: "llama3.2"},
		{File: "no_index.sse", Model: "local"},
	})
}
