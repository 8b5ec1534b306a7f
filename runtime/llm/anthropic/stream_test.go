package anthropic_test

import (
	"testing"

	"github.com/agentd/agentd/runtime/llm/internal/provider/providertest"
)

// TestServedModel: message_start names the model that served the call, a dated
// version of the alias asked for (claude-sonnet-4-5 here); the adapter reports it once.
func TestServedModel(t *testing.T) {
	providertest.TestServedModel(t, adapter, []providertest.Served{
		{File: "text.sse", Model: "claude-sonnet-4-5-20250929"},
		{File: "thinking_tool_use.sse", Model: "claude-sonnet-4-5"},
	})
}
