package anthropic_test

import (
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// An agent on Claude with extended thinking; the key comes from ANTHROPIC_API_KEY.
func ExampleNew() {
	m, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", ThinkingBudget: 4096})
	if err != nil {
		panic(err)
	}
	agent, err := runtime.New(runtime.Config{Model: m, Tools: builtin.Tools(), Policy: builtin.Policy()})
	if err != nil {
		panic(err)
	}
	_ = agent // agent.Run(ctx, &runtime.Request{…})
}
