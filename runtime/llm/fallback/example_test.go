package fallback_test

import (
	"log/slog"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/fallback"
	"github.com/agentd/agentd/runtime/llm/openai"
)

// An agent on an OpenAI model that falls back to Claude, then to a local model, when the
// model before fails (after its own retries) before answering.
func ExampleNew() {
	primary, err := openai.New(openai.Config{Model: "gpt-4.1-mini"})
	if err != nil {
		panic(err)
	}
	second, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5"})
	if err != nil {
		panic(err)
	}
	local, err := openai.New(openai.Config{Model: "llama3.2", BaseURL: "http://localhost:11434/v1"})
	if err != nil {
		panic(err)
	}
	agent, err := runtime.New(runtime.Config{Model: fallback.New(primary, second, local)})
	if err != nil {
		panic(err)
	}
	_ = agent
}

// A chain that logs each fallback, here to the process's logger; the service passes its
// own, whose handler adds the trace ids of the call's context.
func ExampleChain() {
	primary, err := openai.New(openai.Config{Model: "gpt-4.1-mini"})
	if err != nil {
		panic(err)
	}
	local, err := openai.New(openai.Config{Model: "llama3.2", BaseURL: "http://localhost:11434/v1"})
	if err != nil {
		panic(err)
	}
	model := &fallback.Chain{Models: []runtime.Model{primary, local}, Logger: slog.Default()}
	agent, err := runtime.New(runtime.Config{Model: model})
	if err != nil {
		panic(err)
	}
	_ = agent
}
