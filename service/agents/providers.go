package agents

import (
	"fmt"
	"net/http"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/openai"
)

// HostedModelProviders returns the providers of hosted models, configured from the
// environment:
//
//   - "openai" (openai:<model>, such as openai:gpt-4.1-mini): Chat Completions, on the
//     OpenAI API or any OpenAI-compatible server (Ollama, vLLM, llama.cpp,
//     OpenRouter, LM Studio). The key comes from OPENAI_API_KEY and the server from
//     OPENAI_BASE_URL; see [OpenAIModelProvider].
//   - "openai-responses" (openai-responses:<model>, such as openai-responses:o4-mini):
//     the same through the Responses API, for OpenAI's reasoning models, whose
//     reasoning then carries over from step to step (stateless: store false, the
//     reasoning kept encrypted in the transcript).
//   - "anthropic" (anthropic:<model>, such as anthropic:claude-sonnet-4-5): the Messages
//     API, with the key from ANTHROPIC_API_KEY and the server from ANTHROPIC_BASE_URL;
//     see [AnthropicModelProvider].
//
// The variables are read when a spec is resolved. Keys are never logged.
func HostedModelProviders() []ModelProvider {
	return []ModelProvider{OpenAIModelProvider(openai.Config{}), OpenAIModelProvider(openai.Config{Responses: true}), AnthropicModelProvider(anthropic.Config{})}
}

// OpenAIModelProvider returns the "openai" provider. "openai:<model>" makes a model
// from base with Model set to <model>; what base leaves empty takes openai.New's
// defaults (OPENAI_API_KEY, OPENAI_BASE_URL). A spec without a model name wraps
// [ErrUnknownModel]; a spec for the OpenAI API with no key fails, naming
// OPENAI_API_KEY. The models share one connection pool unless base names an
// HTTPClient.
//
// With base.Responses it is the "openai-responses" provider instead: the same models
// through the Responses API ("openai-responses:o4-mini"), which OpenAI's reasoning
// models need to keep their reasoning from step to step.
func OpenAIModelProvider(base openai.Config) ModelProvider {
	if base.HTTPClient == nil {
		base.HTTPClient = providerHTTPClient()
	}
	name, example := openai.Provider, "gpt-4.1-mini"
	if base.Responses {
		name, example = openai.ResponsesProvider, "o4-mini"
	}
	return ModelProvider{
		Name:  name,
		Forms: []string{name + ":<model>"},
		New: func(model string) (runtime.Model, error) {
			if model == "" {
				return nil, fmt.Errorf("%w: the %s provider needs a model name, as in %s:%s", ErrUnknownModel, name, name, example)
			}
			cfg := base
			cfg.Model = model
			return openai.New(cfg)
		},
	}
}

// AnthropicModelProvider returns the "anthropic" provider. "anthropic:<model>" makes a
// model from base with Model set to <model>; what base leaves empty takes
// anthropic.New's defaults (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL). A spec without a
// model name wraps [ErrUnknownModel]; a spec for the Anthropic API with no credential
// fails, naming ANTHROPIC_API_KEY. The models share one connection pool unless base
// names an HTTPClient.
func AnthropicModelProvider(base anthropic.Config) ModelProvider {
	if base.HTTPClient == nil {
		base.HTTPClient = providerHTTPClient()
	}
	return ModelProvider{
		Name:  anthropic.Provider,
		Forms: []string{"anthropic:<model>"},
		New: func(model string) (runtime.Model, error) {
			if model == "" {
				return nil, fmt.Errorf("%w: the anthropic provider needs a model name, as in anthropic:claude-sonnet-4-5", ErrUnknownModel)
			}
			cfg := base
			cfg.Model = model
			return anthropic.New(cfg)
		},
	}
}

// providerHTTPClient returns the client a provider's models share, so that a client's
// model overrides, resolved run by run, reuse connections. Like the SDKs' default, it
// bounds the wait for response headers, not the stream: a stream that goes quiet is the
// adapters' to end, after their IdleTimeout (ModelSettings.IdleTimeout).
func providerHTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{}
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = 10 * time.Minute
	return &http.Client{Transport: t}
}
