package service

import (
	"fmt"
	"os"
	"strings"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/anthropic"
	"github.com/agentd/agentd/runtime/llm/fallback"
	"github.com/agentd/agentd/runtime/llm/openai"
)

// ModelSettings tunes an agent's model calls; unset fields take the provider's defaults.
type ModelSettings struct {
	Temperature *float64 `yaml:"temperature,omitempty"`
	TopP        *float64 `yaml:"top_p,omitempty"`
	MaxTokens   int64    `yaml:"max_tokens,omitempty"`
}

func (s ModelSettings) callSettings() runtime.CallSettings {
	return runtime.CallSettings{Temperature: s.Temperature, TopP: s.TopP, MaxOutputTokens: s.MaxTokens}
}

// resolveModel makes the agent's model from spec: through the registry's resolver, or,
// when the agent names a base URL or a key variable of its own, through its provider
// with those; then wrapped with the agent's fallback models, tried in order when a model
// fails before it streams anything. A fallback on another provider takes that
// provider's defaults.
func (a AgentConfig) resolveModel(spec string, resolve ModelResolver) (runtime.Model, error) {
	model, err := a.primaryModel(spec, resolve)
	if err != nil {
		return nil, err
	}
	if len(a.FallbackModels) == 0 {
		return model, nil
	}
	models := []runtime.Model{model}
	provider, _, _ := strings.Cut(spec, ":")
	for i, fb := range a.FallbackModels {
		// A fallback on the agent's provider uses the agent's server and key too.
		newModel := resolve
		if p, _, _ := strings.Cut(fb, ":"); p == provider {
			newModel = func(spec string) (runtime.Model, error) { return a.primaryModel(spec, resolve) }
		}
		m, err := newModel(fb)
		if err != nil {
			return nil, fmt.Errorf("fallback_models[%d]: %w", i, err)
		}
		models = append(models, m)
	}
	return fallback.New(models...), nil
}

func (a AgentConfig) primaryModel(spec string, resolve ModelResolver) (runtime.Model, error) {
	if a.BaseURL == "" && a.APIKeyEnv == "" {
		return resolve(spec)
	}
	key := ""
	if a.APIKeyEnv != "" {
		key = os.Getenv(a.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("api_key_env: the variable %s is not set", a.APIKeyEnv)
		}
	}
	provider, name, _ := strings.Cut(spec, ":")
	switch provider {
	case openai.Provider:
		return OpenAIModelProvider(openai.Config{BaseURL: a.BaseURL, APIKey: key}).New(name)
	case anthropic.Provider:
		return AnthropicModelProvider(anthropic.Config{BaseURL: a.BaseURL, APIKey: key}).New(name)
	}
	return nil, fmt.Errorf("base_url and api_key_env apply to openai:… and anthropic:… models, not %q", spec)
}
